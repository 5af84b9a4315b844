"""`diagnosis_run.self_evaluation`: the audited record of how an answer came to be.

Never raw Executor text, never the full tool trace, never prompt text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from models.common import Contract, FallbackType, Verdict
from models.composer import ComposerAudit, ComposerOutput
from models.fallback import FallbackReason
from models.gatekeeper import GatekeeperResult, VerifiedEvidence, VerifiedExecutorOutput
from models.verifier import ClaimCheck, EvidenceGap, FactCheck

TRACEABILITY_VERSION = "verity.traceability.v1"


class VerifierStatus(StrEnum):
    """Explicit Verifier execution status; never a verdict."""

    NOT_RUN = "NOT_RUN"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class StageStatus(StrEnum):
    """Execution status of a non-Verifier stage."""

    NOT_RUN = "NOT_RUN"
    OK = "OK"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    FAILED = "FAILED"


class PromptRef(Contract):
    """A prompt by name and version; its text is never persisted."""

    role: str = Field(description="planner, executor, verifier or composer.")
    name: str = Field(description="Prompt name.")
    version: str = Field(description="Prompt version.")
    sha256: str = Field(description="sha256 of the prompt text.")


class PromptUse(Contract):
    """A prompt and the model that answered under it, as a run's model attempts record them.

    Entries are unique on (role, name, version, model) and sorted by those fields, so a list
    of them is a stable key for grouping runs (batch reports do)."""

    role: str = Field(description="planner, executor, verifier, composer or knowledge.")
    name: str = Field(description="Prompt name.")
    version: str = Field(description="Prompt version.")
    sha256: str | None = Field(
        default=None, description="sha256 of the prompt text; null when the prompt file in "
        "force has another name or version than the attempt recorded.")
    model: str = Field(description="Model id, or offline-<agent> for an offline agent.")


class PromptAudit(Contract):
    """Which prompts produced this run."""

    version: str = Field(description="Prompt audit catalog version.")
    prompts: list[PromptRef] = Field(
        description="The catalog in force: the Planner, Executor, Verifier and Composer "
        "prompts, whether or not each ran.")
    used: list[PromptUse] | None = Field(
        default=None, description="What the run's model attempts used, one entry per role, "
        "prompt and model, sorted; roles that made no attempt (did not run, or offline code "
        "that sends no prompt) are absent. Null in rows stored before it was recorded.")


class VerifierEvaluation(Contract):
    """Exactly the fields the spec lists."""

    executor_status: StageStatus = Field(description="OK or INVALID_OUTPUT.")
    verifier_status: VerifierStatus = Field(description="Explicit execution status.")
    model_verdict: Verdict | None = Field(default=None, description="As the model said it.")
    effective_verdict: Verdict | None = Field(default=None, description="After the rules.")
    verdict: Verdict | None = Field(default=None, description="The effective verdict.")
    verdict_ceiling: Verdict | None = Field(default=None, description="Gatekeeper ceiling.")
    groundedness_score: float | None = Field(default=None, description="Model score.")
    rationale: str | None = Field(default=None, description="Verifier rationale.")
    claim_checks: list[ClaimCheck] = Field(default_factory=list, description="Post-checked.")
    facts_checked: list[FactCheck] = Field(default_factory=list, description="Compat mapping.")
    evidence_gaps: list[EvidenceGap] = Field(default_factory=list, description="Gaps.")
    downgrades: list[str] = Field(default_factory=list, description="Post-check downgrades.")
    executor_structured_output: VerifiedExecutorOutput | None = Field(
        default=None, description="At most the verified projection."
    )
    verified_evidence: list[VerifiedEvidence] = Field(
        default_factory=list, description="Bounded snapshot the Verifier used."
    )
    gatekeeper_result: GatekeeperResult | None = Field(default=None, description="Audit.")
    composer_status: StageStatus = Field(description="Composer execution status.")
    composer_output: ComposerOutput | None = Field(default=None, description="Parsed answer.")
    composer_audit: ComposerAudit | None = Field(
        default=None, description="The statement check of the Composer's last reply: sections "
        "of its accepted statements, refused statements (first 160 characters) and why. Null "
        "when no Composer reply was read.")
    prompt_audit: PromptAudit = Field(description="Prompt names and versions.")
    traceability_version: str = Field(description="Traceability schema version.")
    evidence_retry_count: int = Field(default=0, ge=0, description="Evidence retries done.")
    fallback_type: FallbackType | None = Field(default=None, description="If it fell back.")
    failure_stage: str | None = Field(default=None, description="Node that failed.")
    failure_reason: FallbackReason | None = Field(default=None, description="Fixed code.")


class SelfEvaluation(Contract):
    """The JSON column on diagnosis_run."""

    rule_evaluation: dict[str, Any] = Field(description="Deterministic rule channel.")
    aiops_rule_evaluation: dict[str, Any] = Field(description="Invocation statistics channel.")
    verifier_evaluation: VerifierEvaluation = Field(description="The Verifier record.")
