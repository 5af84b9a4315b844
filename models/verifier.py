"""Verifier input and output."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from models.common import Contract, Intent, Verdict
from models.gatekeeper import RuleId, Severity, VerifiedEvidence, VerifiedExecutorOutput


class Verification(StrEnum):
    """The six verification classes of a claim check."""

    DIRECT_OBSERVATION = "direct_observation"
    REASONABLE_INFERENCE = "reasonable_inference"
    OVERSTATED = "overstated"
    UNSUPPORTED = "unsupported"
    EXTERNAL_UNKNOWN = "external_unknown"
    CONTRADICTED = "contradicted"


class FactClass(StrEnum):
    """The fixed compatibility classification of `facts_checked`."""

    DIRECT_EVIDENCE = "direct_evidence"
    INDIRECT_SUPPORT = "indirect_support"
    NO_EVIDENCE = "no_evidence"
    CONTRADICTED = "contradicted"


class DiagnosisContext(Contract):
    """What the user asked; nothing from intermediate reasoning."""

    query: str = Field(description="The original question.")
    intent: Intent = Field(description="The routed intent.")


class GatekeeperAudit(Contract):
    """The Gatekeeper audit as the Verifier sees it: outcomes and counts, no failed material."""

    status: str = Field(description="pass or fail.")
    severity: Severity = Field(description="Raw severity.")
    failed_rules: list[RuleId] = Field(description="Failed rule ids.")
    checked_bindings: int = Field(ge=0, description="Bindings checked.")
    passed_bindings: int = Field(ge=0, description="Bindings that passed.")
    warnings: list[str] = Field(default_factory=list, description="Gatekeeper warnings.")


class RetryContext(Contract):
    """Present only after an evidence-retry preparation."""

    evidence_retry_count: int = Field(ge=1, description="Evidence retries done.")
    previous_gaps: list[str] = Field(description="Gap descriptions the retry targeted.")


class VerifierInput(Contract):
    """Exactly the blocks the spec allows; serialized byte-stably."""

    diagnosis_context: DiagnosisContext = Field(description="Query and intent.")
    verified_executor_output: VerifiedExecutorOutput = Field(description="Verified claims.")
    verified_evidence: list[VerifiedEvidence] = Field(description="Passed bindings only.")
    gatekeeper_audit: GatekeeperAudit = Field(description="Raw Gatekeeper audit.")
    verdict_ceiling: Verdict = Field(description="Normalized ceiling: PASS or LOW_CONFID.")
    retry_context: RetryContext | None = Field(default=None, description="After evidence retry.")


class ClaimCheck(Contract):
    """The Verifier's judgment of one claim."""

    claim_id: str = Field(description="A verified claim id.")
    verification: Verification = Field(description="One of the six classes.")
    evidence_refs: list[str] = Field(
        default_factory=list,
        description="Evidence ids, claim ids, invocation ids, tool names or paths of verified "
        "evidence.",
    )
    note: str | None = Field(default=None, description="Short reason.")


class EvidenceGap(Contract):
    """Evidence that would settle a claim."""

    claim_id: str | None = Field(default=None, description="Claim the gap concerns.")
    description: str = Field(min_length=1, description="What is missing.")
    critical: bool = Field(description="True when a critical claim depends on it.")
    suggested_tool: str | None = Field(default=None, description="Tool that could fill it.")


class FactCheck(Contract):
    """Compatibility view of a claim check."""

    claim_id: str = Field(description="Claim id.")
    classification: FactClass = Field(description="Fixed classification.")


class VerifierOutput(Contract):
    """What the Verifier returns."""

    verdict: Verdict = Field(description="Model verdict.")
    groundedness_score: float = Field(ge=0.0, le=1.0, description="0 to 1.")
    rationale: str = Field(description="Short reasoning summary.")
    claim_checks: list[ClaimCheck] = Field(description="One per verified claim.")
    evidence_gaps: list[EvidenceGap] = Field(default_factory=list, description="Gaps found.")
    facts_checked: list[FactCheck] | None = Field(
        default=None, description="Derived by the fixed mapping when absent."
    )
