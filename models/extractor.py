"""What the claim extractor answers: the claims of another agent's answer, each copied exactly
from it. The model gives the text; code finds its span (`pipeline.rules.extracted`)."""

from __future__ import annotations

from pydantic import Field

from models.common import Contract
from models.executor import ClaimKind


class ExtractedClaim(Contract):
    """One claim of the answer, as the extractor read it."""

    text: str = Field(min_length=1, description="The claim copied character for character "
                      "from the answer.")
    kind: ClaimKind = Field(description="Analysis kind.")
    hedged: bool = Field(description="Worded as a possibility.")
    action: bool = Field(description="A recommendation rather than a claim.")
    critical: bool = Field(description="A root cause, or a finding the conclusion rests on "
                           "(recomputed by code).")


class ExtractorOutput(Contract):
    """The extractor's whole answer."""

    claims: list[ExtractedClaim] = Field(description="The claims, in the order they stand.")
