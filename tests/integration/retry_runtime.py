"""A worker runtime whose Verifier always asks for more evidence (a test double standing in for
a model): the runtime must still run exactly one EVIDENCE_GAP_ONLY cycle.

Loaded by workers through VERITY_RUNTIME_FACTORY=tests.integration.retry_runtime:build.
"""

from __future__ import annotations

from models.common import Verdict
from models.verifier import EvidenceGap, VerifierInput
from pipeline.agents.offline_verifier import verify
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.run.runtime import Runtime


class GapAskingVerifier:
    """The offline Verifier's checks, but always LOW_CONFID with one critical gap."""

    model = "test-gap-asking-verifier"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Verify, then ask for metrics of the first claim."""
        verifier_input = VerifierInput.model_validate_json(payload)
        output = verify(verifier_input)
        first = verifier_input.verified_executor_output.claims[0].claim_id
        gap = EvidenceGap(claim_id=first, description="Metrics for the failing service are "
                          "needed to confirm the onset.", critical=True,
                          suggested_tool="query_metrics")
        asked = output.model_copy(update={"verdict": Verdict.LOW_CONFID,
                                          "evidence_gaps": [*output.evidence_gaps, gap]})
        return ModelReply(text=asked.model_dump_json())


def build(settings: VeritySettings) -> Runtime:
    """The offline runtime with the gap-asking Verifier."""
    runtime = build_runtime(settings)
    runtime.agents.verifier = GapAskingVerifier()
    return runtime
