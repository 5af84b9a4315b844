"""What the claim extractor answers: the claims of another agent's answer, each copied exactly
from it. The model gives the text; code finds its span (`pipeline.rules.extracted`). An imported
run's claims (`models.bundle.ImportedClaim`) are `AnswerClaim`s too."""

from __future__ import annotations

from pydantic import Field

from models.common import Contract
from models.executor import ClaimKind


class AnswerClaim(Contract):
    """A claim split from an answer's prose: its own words and how they read."""

    text: str = Field(min_length=1, description="The claim copied character for character "
                      "from the answer.")
    kind: ClaimKind = Field(description="Analysis kind, read from its wording and heading.")
    hedged: bool = Field(description="Worded as a possibility: a HYPOTHESIS claim.")
    action: bool = Field(description="A recommendation rather than a claim: a recommended "
                         "action.")
    critical: bool = Field(description="A root cause, or a finding the conclusion rests on.")


class ExtractedClaim(AnswerClaim):
    """One claim of the answer, as the extractor read it (code recomputes `critical`)."""


class ExtractorOutput(Contract):
    """The extractor's whole answer."""

    claims: list[ExtractedClaim] = Field(description="The claims, in the order they stand.")
