"""A worker runtime with a stricter Verifier (a test double for a changed Verifier prompt or
model): the offline Verifier's checks, but no claim is a direct observation any more, so a run
that passed can at best be LOW_CONFID.

Loaded by workers through VERITY_RUNTIME_FACTORY=tests.integration.strict_runtime:build.
"""

from __future__ import annotations

from models.verifier import Verification, VerifierInput
from pipeline.agents.offline_verifier import verify
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.run.runtime import Runtime

MODEL = "test-strict-verifier"


class StrictVerifier:
    """Holds every direct observation to a reasonable inference."""

    model = MODEL

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Verify offline, then weaken every direct observation."""
        output = verify(VerifierInput.model_validate_json(payload))
        checks = [c.model_copy(update={"verification": Verification.REASONABLE_INFERENCE})
                  if c.verification is Verification.DIRECT_OBSERVATION else c
                  for c in output.claim_checks]
        return ModelReply(text=output.model_copy(update={"claim_checks": checks})
                          .model_dump_json())


def build(settings: VeritySettings) -> Runtime:
    """The offline runtime with the strict Verifier."""
    runtime = build_runtime(settings)
    runtime.agents.verifier = StrictVerifier()
    return runtime
