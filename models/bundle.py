"""The run bundle (interchange format) and the result of verifying one."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from models.common import Contract, FallbackType, Intent, Verdict
from models.evaluation import SelfEvaluation
from models.extractor import AnswerClaim
from models.invocation import ToolInvocation
from models.verifier import RetryContext

ImportFormat = Literal["anthropic", "openai", "otel", "files"]
"""The public formats another agent's run is imported from."""


class ImportedClaim(AnswerClaim):
    """One claim (or recommended action) split from an imported answer's prose."""

    claim_id: str = Field(min_length=1, description="Its id in executor_output_raw (c1, a1 ...).")
    start: int = Field(ge=0, description="Offset of its first character in the answer.")
    end: int = Field(ge=0, description="Offset after its last character.")
    bound: bool = Field(description="The binder found tool output for it; False: it is not in "
                        "executor_output_raw and cannot be verified.")


class ImportedAnswer(Contract):
    """Another agent's answer as it wrote it, and where each of its claims stands in it."""

    format: ImportFormat = Field(description="The format it was imported from.")
    agent: str | None = Field(default=None, description="The model or agent, if named.")
    answer: str = Field(min_length=1, description="The final answer, as written.")
    claims: list[ImportedClaim] = Field(description="Its claims and actions, in order.")
    trace_id: str | None = Field(default=None, description="The source trace (otel), if any.")
    span_id: str | None = Field(default=None, description="The span that wrote the answer.")
    response_id: str | None = Field(default=None, description="The provider's response id.")

    @model_validator(mode="after")
    def _spans_within_answer(self) -> Self:
        seen: set[str] = set()
        for claim in self.claims:
            if not claim.start < claim.end <= len(self.answer):
                raise ValueError(f"claim {claim.claim_id}: span {claim.start}-{claim.end} is "
                                 f"outside the answer ({len(self.answer)} characters)")
            if self.answer[claim.start:claim.end] != claim.text:
                raise ValueError(f"claim {claim.claim_id}: text is not the answer's characters "
                                 f"{claim.start}-{claim.end}")
            if claim.claim_id in seen:
                raise ValueError(f"duplicate claim_id {claim.claim_id!r}")
            seen.add(claim.claim_id)
        return self

    @property
    def unverifiable_critical(self) -> list[str]:
        """Critical claims no tool output was found for: they cap the verdict."""
        return [c.claim_id for c in self.claims if c.critical and not c.bound and not c.action]


class RunBundle(Contract):
    """A stored or exported run: enough to re-run gatekeep, verify and compose."""

    bundle_version: Literal[1] = Field(default=1, description="Format version.")
    run_id: str | None = Field(default=None, description="Source run, when exported.")
    session_id: str | None = Field(default=None, description="Conversation session.")
    query: str = Field(min_length=1, description="The user's question.")
    intent: Intent = Field(default=Intent.DIAGNOSIS, description="Routed intent.")
    invocations: list[ToolInvocation] = Field(description="Every tool call of the run.")
    executor_output_raw: str = Field(description="Exactly what the Executor returned.")
    retry_context: RetryContext | None = Field(
        default=None, description="Set when the output came from the evidence-retry cycle."
    )
    imported: ImportedAnswer | None = Field(
        default=None, description="Set when the run is another agent's, imported: its answer "
        "as written and the span of each claim (executor_output_raw holds the bound ones).")


class FinalAnswer(Contract):
    """What the user sees."""

    answer_summary: str = Field(description="Summary.")
    recommended_actions: list[str] = Field(description="Next steps.")
    user_facing_answer: str = Field(description="The answer.")


class RunResult(Contract):
    """The outcome of a run or of `verity verify`; `--json` prints exactly this."""

    run_id: str = Field(description="Run id.")
    status: Literal["SUCCESS", "FALLBACK"] = Field(description="Released outcome.")
    verdict: Verdict | None = Field(description="Effective verdict; None if not verified.")
    fallback_type: FallbackType | None = Field(description="Set when status is FALLBACK.")
    final_answer: FinalAnswer = Field(description="The answer.")
    self_evaluation: SelfEvaluation = Field(description="The audit record.")
