"""Composer input (filtered material only) and output (strict JSON)."""

from __future__ import annotations

from pydantic import Field

from models.common import Contract, Verdict
from models.executor import ClaimKind
from models.verifier import Verification


class AllowedClaim(Contract):
    """A verified claim the Verifier allows the Composer to use."""

    claim_id: str = Field(description="Claim id.")
    text: str = Field(description="Claim text.")
    kind: ClaimKind = Field(description="Analysis kind.")
    critical: bool = Field(description="Whether the diagnosis rests on it.")
    verification: Verification = Field(description="direct_observation or reasonable_inference.")


class AllowedHypothesis(Contract):
    """A possible direction; never to be stated as confirmed."""

    text: str = Field(description="Hypothesis text.")
    claim_ids: list[str] = Field(default_factory=list, description="Claims it rests on.")


class ComposerAction(Contract):
    """A recommended action the Composer may use."""

    text: str = Field(description="Action text.")
    claim_ids: list[str] = Field(default_factory=list, description="Allowed claims behind it.")


class RunbookStep(Contract):
    """A step of a runbook document a verified claim cites: what may stand behind an action."""

    claim_id: str = Field(description="The claim bound to the runbook document.")
    doc_id: str = Field(description="The runbook document.")
    text: str = Field(description="The step, as the runbook states it.")


class WithheldAction(Contract):
    """An Executor action the action guard kept from the Composer, and why."""

    index: int = Field(ge=0, description="Its position in the Executor's recommended_actions.")
    text: str = Field(description="The action as the Executor wrote it.")
    reason: str = Field(description="Why it was withheld, one line.")


class ComposerInput(Contract):
    """Exactly what the Composer may read."""

    original_query: str = Field(description="The user's question.")
    verdict: Verdict = Field(description="Effective verdict.")
    allowed_claims: list[AllowedClaim] = Field(description="Claims it may state.")
    allowed_hypotheses: list[AllowedHypothesis] = Field(description="Empty on REJECT.")
    missing_info: list[str] = Field(description="Evidence gaps to mention.")
    recommended_actions: list[ComposerAction] = Field(description="Actions it may recommend.")
    rationale: str = Field(description="The Verifier's rationale, filtered.")


class ComposerOutput(Contract):
    """The final answer, one JSON object."""

    answer_summary: str = Field(min_length=1, description="One or two sentences.")
    recommended_actions: list[str] = Field(description="Next steps.")
    user_facing_answer: str = Field(min_length=1, description="The answer shown to the user.")
