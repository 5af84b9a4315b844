"""Composer input (filtered material only) and output (strict JSON)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

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

    hypothesis_id: str = Field(default="", description="Its id, for statements to cite.")
    text: str = Field(description="Hypothesis text.")
    claim_ids: list[str] = Field(default_factory=list, description="Claims it rests on.")


class ComposerAction(Contract):
    """A recommended action the Composer may use."""

    action_id: str = Field(default="", description="Its id, for statements to cite.")
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


class GapItem(Contract):
    """An evidence gap the user may read: what is missing, never a finding or a cause."""

    gap_id: str = Field(default="", description="Its id, for statements to cite.")
    text: str = Field(description="What evidence is missing.")


class ComposerInput(Contract):
    """Exactly what the Composer may read."""

    original_query: str = Field(description="The user's question.")
    verdict: Verdict = Field(description="Effective verdict.")
    allowed_claims: list[AllowedClaim] = Field(description="Claims it may state.")
    allowed_hypotheses: list[AllowedHypothesis] = Field(description="Empty on REJECT.")
    missing_info: list[GapItem] = Field(description="Evidence gaps to mention.")
    recommended_actions: list[ComposerAction] = Field(description="Actions it may recommend.")
    rationale: str = Field(description="The Verifier's rationale, filtered; never citable.")

    @field_validator("missing_info", mode="before")
    @classmethod
    def _gap_items(cls, value: Any) -> Any:
        """Inputs stored before gaps had ids held plain strings: they become G1, G2 ..."""
        if isinstance(value, list):
            return [{"gap_id": f"G{i}", "text": item} if isinstance(item, str) else item
                    for i, item in enumerate(value, 1)]
        return value

    def ids(self) -> dict[str, str]:
        """Every citable id and what it names: claim, hypothesis, gap or action."""
        cited = {c.claim_id: "claim" for c in self.allowed_claims}
        cited.update({h.hypothesis_id: "hypothesis" for h in self.allowed_hypotheses})
        cited.update({g.gap_id: "gap" for g in self.missing_info})
        cited.update({a.action_id: "action" for a in self.recommended_actions})
        return cited


class ComposerOutput(Contract):
    """The final answer, one JSON object."""

    answer_summary: str = Field(min_length=1, description="One or two sentences.")
    recommended_actions: list[str] = Field(description="Next steps.")
    user_facing_answer: str = Field(min_length=1, description="The answer shown to the user.")


class Statement(Contract):
    """One sentence of the answer and the ids of the input material it rests on."""

    text: str = Field(min_length=1, max_length=1200, description="One sentence, plain text.")
    cites: list[str] = Field(
        min_length=1, max_length=24,
        description="Ids from the input: allowed claim ids, hypothesis ids (H1 ...), gap ids "
        "(G1 ...) or, in recommended_actions, action ids (A1 ...).")


class ComposerReply(Contract):
    """What the Composer model returns: each of the spec's three fields made of cited
    statements. The published answer (`ComposerOutput`) is assembled from the statements that
    pass the statement check (`pipeline.rules.statements`)."""

    answer_summary: list[Statement] = Field(
        max_length=6, description="One or two statements that sum the answer up.")
    user_facing_answer: list[Statement] = Field(
        max_length=80, description="The body: findings, root cause, possible directions, gaps.")
    recommended_actions: list[Statement] = Field(
        max_length=12, description="Next steps, each citing the action ids it restates.")


ComposerField = Literal["answer_summary", "user_facing_answer", "recommended_actions"]


class RejectedStatement(Contract):
    """A statement the check refused, compactly: where it was, its opening words, why."""

    field: ComposerField = Field(description="The reply field it was in.")
    index: int = Field(ge=0, description="Its position in that field.")
    text: str = Field(description="Its first 160 characters.")
    reason: str = Field(description="Why it was refused, one line.")


class ComposerAudit(Contract):
    """The statement check of the Composer's last reply: what it cited, what was refused."""

    status: Literal["accepted", "rejected", "invalid"] = Field(
        description="accepted: every statement passed and the answer was published; rejected: "
        "one failed (the answer went to the retry, then the fallback); invalid: no reply "
        "of the contract's shape.")
    statements: int = Field(ge=0, description="Statements in the reply.")
    accepted: int = Field(ge=0, description="Statements that passed.")
    sections: dict[str, int] = Field(
        default_factory=dict, description="Accepted statements per section of the answer.")
    rejected: list[RejectedStatement] = Field(
        default_factory=list, description="Refused statements (at most 10).")
