"""`executor_evidence_v2`: what the Executor returns — claims bound to tool output."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from models.common import Contract

REMOVED_FIELDS = ("diagnosis_summary", "user_facing_answer")
"""Fields of the old draft contract; their presence fails rule `schema.executor_v2`."""


class ClaimKind(StrEnum):
    """The fixed analysis kinds."""

    FINDING = "FINDING"
    ROOT_CAUSE = "ROOT_CAUSE"
    CONTRIBUTING_FACTOR = "CONTRIBUTING_FACTOR"
    CORRELATION = "CORRELATION"
    NEGATIVE_OBSERVATION = "NEGATIVE_OBSERVATION"


CONCLUSIONS = frozenset(
    {ClaimKind.ROOT_CAUSE, ClaimKind.CONTRIBUTING_FACTOR, ClaimKind.CORRELATION}
)
"""The kinds that conclude (a cause, a factor, a link) rather than observe."""


class ClaimStatus(StrEnum):
    """Whether the Executor asserts the claim or only proposes it."""

    CONFIRMED = "CONFIRMED"
    HYPOTHESIS = "HYPOTHESIS"


class EvidenceBinding(Contract):
    """Binds a claim to the exact text at a path of one invocation's projection."""

    invocation_id: str = Field(description="The tool_call_id of a current-run invocation.")
    tool_name: str = Field(description="Must equal the stored invocation's tool_name.")
    path: str = Field(description="Singular JSONPath into the stored projection.")
    matched_text: str = Field(description="Text that occurs in the value at path.")


class Claim(Contract):
    """One analysis item of the Executor's report."""

    claim_id: str = Field(min_length=1, description="Unique within the output.")
    text: str = Field(min_length=1, description="The claim as stated.")
    kind: ClaimKind = Field(description="Analysis kind.")
    critical: bool = Field(description="True when the diagnosis rests on this claim.")
    status: ClaimStatus = Field(description="CONFIRMED needs at least one binding.")
    evidence_bindings: list[EvidenceBinding] = Field(default_factory=list, description="Bindings.")


class Hypothesis(Contract):
    """A possible direction, resting on claims by id."""

    text: str = Field(min_length=1, description="The hypothesis.")
    claim_ids: list[str] = Field(default_factory=list, description="Claims it rests on.")


class RecommendedAction(Contract):
    """A next step, citing the claims that motivate it."""

    text: str = Field(min_length=1, description="The action.")
    claim_ids: list[str] = Field(default_factory=list, description="Claims that motivate it.")


class ExecutorEvidenceV2(Contract):
    """The Executor's whole structured output."""

    claims: list[Claim] = Field(description="Analysis items, each bound to evidence.")
    hypotheses: list[Hypothesis] = Field(default_factory=list, description="Possible directions.")
    missing_info: list[str] = Field(default_factory=list, description="What evidence is missing.")
    recommended_actions: list[RecommendedAction] = Field(
        default_factory=list, description="Next steps."
    )
