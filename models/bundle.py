"""The run bundle (interchange format) and the result of verifying one."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from models.common import Contract, FallbackType, Intent, Verdict
from models.evaluation import SelfEvaluation
from models.invocation import ToolInvocation
from models.verifier import RetryContext


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
