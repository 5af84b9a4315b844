"""Batch re-verification: a batch over selected stored runs, its items and their outcomes."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from models.common import MAX_INT32, Contract, RunStatus, UtcTime
from models.run import RunRecord
from models.verifier import Verification

NULL_VERDICT = "null"
"""The verdict label of a run that has none (the Verifier did not complete)."""


class BatchStatus(StrEnum):
    """A batch's lifecycle: PENDING until its first chunk starts, then RUNNING, then one of
    the three terminal statuses."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    COMPLETED_WITH_ERRORS = "COMPLETED_WITH_ERRORS"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """No item of the batch will be judged any more."""
        return self in (BatchStatus.COMPLETED, BatchStatus.COMPLETED_WITH_ERRORS,
                        BatchStatus.CANCELLED)


class ItemStatus(StrEnum):
    """PENDING until judged once: DONE with a result, or ERROR with a one-line reason."""

    PENDING = "PENDING"
    DONE = "DONE"
    ERROR = "ERROR"


class Selection(Contract):
    """Which stored runs of a tenant: the filters of `verity runs` and `verity reverify`."""

    since: UtcTime | None = Field(default=None, description="Created at or after (UTC).")
    until: UtcTime | None = Field(default=None, description="Created before (UTC).")
    session_id: str | None = Field(default=None, description="Of this session only.")
    verdicts: list[str] = Field(
        default_factory=list, description="PASS, LOW_CONFID, REJECT or null (no verdict).")
    statuses: list[RunStatus] = Field(default_factory=list, description="Run statuses.")
    prompt_versions: dict[str, str] = Field(
        default_factory=dict, description="Role -> prompt version the run used.")
    models: list[str] = Field(default_factory=list, description="A model the run used.")
    limit: int | None = Field(default=None, ge=1, le=MAX_INT32,
                              description="At most this many, newest first.")

    def matches(self, record: RunRecord) -> bool:
        """The filters the store does not apply in SQL, on one run: the verdict label (null
        included), the prompt versions and models its audit names."""
        label = record.verdict.value if record.verdict else NULL_VERDICT
        if self.verdicts and label not in self.verdicts:
            return False
        if not (self.prompt_versions or self.models):
            return True
        evaluation = record.self_evaluation
        refs = list(evaluation.verifier_evaluation.prompt_audit.prompts) if evaluation else []
        versions = {ref.role: ref.version for ref in refs}
        if any(versions.get(role) != v for role, v in self.prompt_versions.items()):
            return False
        used = {getattr(ref, "model", None) for ref in refs} - {None}
        return not self.models or bool(used & set(self.models))


class ClaimChange(Contract):
    """One claim's check before and after re-verification."""

    claim_id: str = Field(description="Claim id.")
    old: Verification | None = Field(default=None, description="The stored run's check.")
    new: Verification | None = Field(default=None, description="Today's check.")


class ItemDetail(Contract):
    """What changed for one run, beyond its verdict and status."""

    old_severity: str | None = Field(default=None, description="Stored Gatekeeper severity.")
    new_severity: str | None = Field(default=None, description="Today's Gatekeeper severity.")
    old_failed_rules: list[str] = Field(default_factory=list, description="Stored.")
    new_failed_rules: list[str] = Field(default_factory=list, description="Today's.")
    claims: list[ClaimChange] = Field(default_factory=list, description="Every claim's checks.")
    downgrades: list[str] = Field(default_factory=list, description="Today's post-check changes.")
    rationale: str | None = Field(default=None, description="Today's Verifier rationale.")
    prompts: list[str] = Field(
        default_factory=list, description="role:name@version of each prompt used today.")
    models: list[str] = Field(default_factory=list, description="Models used today.")
    new_failure_reason: str | None = Field(default=None, description="Today's fallback reason.")


class ItemResult(Contract):
    """One item's new outcome, as the chunk that judged it writes it."""

    seq: int = Field(ge=0, description="The item's position in the batch.")
    run_id: str = Field(description="The stored run.")
    status: ItemStatus = Field(description="DONE or ERROR.")
    old_status: str | None = Field(default=None, description="Stored run status.")
    old_verdict: str | None = Field(default=None, description="Stored effective verdict.")
    old_fallback_type: str | None = Field(default=None, description="Stored fallback type.")
    new_status: str | None = Field(default=None, description="SUCCESS or FALLBACK today.")
    new_verdict: str | None = Field(default=None, description="Today's effective verdict.")
    new_fallback_type: str | None = Field(default=None, description="Today's fallback type.")
    detail: ItemDetail | None = Field(default=None, description="What else changed.")
    input_tokens: int = Field(default=0, ge=0, description="Model input tokens spent today.")
    output_tokens: int = Field(default=0, ge=0, description="Model output tokens.")
    cost_usd: float = Field(default=0.0, ge=0, description="Cost of today's model calls.")
    error: str | None = Field(default=None, description="Why the run could not be re-judged.")


class ItemRecord(ItemResult):
    """A stored item."""

    batch_id: str = Field(description="Its batch.")
    finished_at: datetime | None = Field(default=None, description="When it was judged.")


class BatchRecord(Contract):
    """A reverify_batch row."""

    batch_id: str = Field(description="Batch id.")
    tenant_id: str = Field(description="Owner; only its runs are selected.")
    status: BatchStatus = Field(description="Lifecycle status.")
    provider: str = Field(description="offline or anthropic.")
    message_batches: bool = Field(default=False, description="Claude through Message Batches.")
    selection: Selection = Field(description="The filters that selected its runs.")
    chunk_size: int = Field(ge=1, description="Items per chunk task.")
    total: int = Field(ge=0, description="Items selected.")
    done: int = Field(ge=0, description="Items judged.")
    failed: int = Field(ge=0, description="Items that could not be judged.")
    cancel_requested: bool = Field(default=False, description="Cancel asked for.")
    created_at: datetime | None = Field(default=None, description="Created (UTC).")
    updated_at: datetime | None = Field(default=None, description="Last progress (UTC).")
    started_at: datetime | None = Field(default=None, description="First chunk started.")
    finished_at: datetime | None = Field(default=None, description="Ended.")
    resend_count: int = Field(default=0, ge=0, description="Stalled-chunk re-sends.")

    @property
    def pending(self) -> int:
        """Items not judged yet."""
        return max(self.total - self.done - self.failed, 0)
