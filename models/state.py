"""The state of one diagnosis pass as the nodes build it, node by node.

Each node reads what it needs from here and adds its own output; the store persists it between
nodes, and `pipeline/run/evaluation.py` maps the final state onto `self_evaluation`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from models.agent import KnowledgeAnswer, Plan, Transcript
from models.common import Contract, FallbackType, Intent, Verdict
from models.composer import (
    ComposerAudit,
    ComposerInput,
    ComposerOutput,
    RunbookStep,
    WithheldAction,
)
from models.evaluation import PromptUse, StageStatus, VerifierStatus
from models.fallback import FallbackReason, SafeFallback
from models.gatekeeper import GatekeeperOutcome
from models.verifier import ClaimCheck, EvidenceGap, RetryContext, VerifierOutput


class PipelineState(Contract):
    """Outputs of parse, gatekeep, verify, compose and fallback for one run."""

    query: str = Field(description="The user's question.")
    intent: Intent = Field(default=Intent.DIAGNOSIS, description="Routed intent.")
    evidence_retry_count: int = Field(default=0, ge=0, description="Evidence retries done.")
    retry_context: RetryContext | None = Field(default=None, description="After evidence retry.")
    executor_status: StageStatus = Field(default=StageStatus.NOT_RUN, description="Parse result.")
    parse_failure: str | None = Field(default=None, description="Why parsing failed.")
    gatekeeper: GatekeeperOutcome | None = Field(default=None, description="Gatekeeper outcome.")
    verifier_status: VerifierStatus = Field(default=VerifierStatus.NOT_RUN, description="Status.")
    verifier_input_sha256: str | None = Field(default=None, description="Serialized input hash.")
    verifier_output: VerifierOutput | None = Field(default=None, description="As returned.")
    claim_checks: list[ClaimCheck] = Field(default_factory=list, description="Post-checked.")
    evidence_gaps: list[EvidenceGap] = Field(default_factory=list, description="Post-checked.")
    downgrades: list[str] = Field(default_factory=list, description="Post-check changes.")
    verdict_ceiling: Verdict | None = Field(default=None, description="From the Gatekeeper.")
    unverifiable_critical: list[str] = Field(
        default_factory=list, description="Critical claims of an imported answer that no tool "
        "output was found for (not in the Executor output): the verdict cannot pass.")
    effective_verdict: Verdict | None = Field(default=None, description="After the rules.")
    runbook_steps: list[RunbookStep] = Field(
        default_factory=list, description="Steps of the runbooks verified claims cite.")
    composer_input: ComposerInput | None = Field(default=None, description="Filtered material.")
    withheld_actions: list[WithheldAction] = Field(
        default_factory=list, description="Actions the action guard withheld, with reasons.")
    composer_status: StageStatus = Field(default=StageStatus.NOT_RUN, description="Status.")
    composer_output: ComposerOutput | None = Field(default=None, description="Guarded answer.")
    composer_audit: ComposerAudit | None = Field(
        default=None, description="The statement check of the Composer's last reply.")
    fallback: SafeFallback | None = Field(default=None, description="Set on fallback paths.")
    budget_exceeded: bool = Field(default=False, description="A model call hit the budget.")
    structural_repair: bool = Field(
        default=False, description="The Executor's one no-tool structural repair was asked for.")
    failure_stage: str | None = Field(default=None, description="Node that failed.")


class NextStep(Contract):
    """What the runtime dispatches after a node commits; stored so a redelivery can resend it."""

    node: str = Field(description="Next node; after tools, the chord body's node.")
    tool_call_ids: list[str] = Field(default_factory=list, description="Tools to fan out first.")
    fallback_type: FallbackType | None = Field(default=None, description="For the fallback.")
    reason: FallbackReason | None = Field(default=None, description="For the fallback.")


class NodeFailure(Contract):
    """A node that could not go on normally (a model call failed): the fallback it routes to."""

    fallback_type: FallbackType = Field(description="The fixed fallback type.")
    reason: FallbackReason = Field(description="Why.")


class RunTelemetry(Contract):
    """What a run carries for Verity's own telemetry: when it was submitted, so whichever
    process ends it times it and writes its root span from then."""

    submitted_at: float = Field(description="Submit time, epoch seconds.")


class RuntimeState(Contract):
    """The whole working state of a run between nodes (the `state` column)."""

    pipeline: PipelineState = Field(description="Outputs of the deterministic nodes.")
    session_id: str | None = Field(default=None, description="Conversation session.")
    plan: Plan | None = Field(default=None, description="This cycle's plan.")
    transcript: Transcript | None = Field(default=None, description="This cycle's Executor loop.")
    knowledge: KnowledgeAnswer | None = Field(default=None, description="Knowledge answer.")
    knowledge_errors: list[str] = Field(default_factory=list, description="Reference errors.")
    retry_gaps: list[EvidenceGap] = Field(
        default_factory=list, description="Gaps the evidence-retry cycle must fill."
    )
    next: NextStep | None = Field(default=None, description="Dispatched after the last commit.")
    attempt_counters: dict[str, int] = Field(
        default_factory=dict, description="Last attempt number per role in this cycle."
    )
    tokens_used: int = Field(default=0, ge=0, description="Model tokens spent by the run.")
    prompts_used: list[PromptUse] = Field(
        default_factory=list, description="Prompts and models the run's attempts used so far "
        "(`pipeline.prompts.prompts_used`): the prompt audit's `used`.")
    failure: NodeFailure | None = Field(
        default=None, description="Set by a node whose model call failed; routes to fallback.")
    telemetry: RunTelemetry | None = Field(
        default=None, description="Submit time (Verity's own telemetry).")
    carried: dict[str, Any] | None = Field(
        default=None, description="The first cycle's verified claims (an executor_evidence_v2 "
        "document) that the EVIDENCE_GAP_ONLY cycle supplements.")
