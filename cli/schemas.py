"""Contract names that `verity schema NAME` knows."""

from __future__ import annotations

from pydantic import BaseModel

from models.bundle import RunBundle, RunResult
from models.composer import ComposerInput, ComposerOutput
from models.evaluation import PromptAudit, SelfEvaluation, VerifierEvaluation
from models.executor import ExecutorEvidenceV2
from models.extractor import ExtractorOutput
from models.fallback import SafeFallback
from models.gatekeeper import GatekeeperResult
from models.invocation import Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunRecord
from models.verifier import VerifierInput, VerifierOutput

SCHEMAS: dict[str, type[BaseModel]] = {
    "tool_invocation": ToolInvocation,
    "projection": Projection,
    "executor_evidence_v2": ExecutorEvidenceV2,
    "extractor_output": ExtractorOutput,
    "gatekeeper_result": GatekeeperResult,
    "verifier_input": VerifierInput,
    "verifier_output": VerifierOutput,
    "composer_input": ComposerInput,
    "composer_output": ComposerOutput,
    "safe_fallback": SafeFallback,
    "verifier_evaluation": VerifierEvaluation,
    "prompt_audit": PromptAudit,
    "self_evaluation": SelfEvaluation,
    "run_bundle": RunBundle,
    "run_result": RunResult,
    "run_record": RunRecord,
    "run_event": RunEvent,
    "llm_attempt": LlmAttempt,
}
