"""The check of another agent's answer: its verdict and, for each claim of the answer as it
was written, where it stands, how it was judged and the tool output it was bound to. What
`verity check-answer --json`, `verity import --json` and `POST /checks` print."""

from __future__ import annotations

from pydantic import Field

from models.bundle import ImportFormat
from models.common import Contract, FallbackType, Verdict
from models.executor import ClaimKind
from models.verifier import Verification


class ClaimBinding(Contract):
    """One value of a tool output a claim was bound to, as the binder found it."""

    tool_call_id: str = Field(description="The source's own tool call id.")
    tool_name: str = Field(description="The tool (or evidence file) it came from.")
    path: str = Field(description="Singular JSONPath into the call's projection.")
    matched_text: str = Field(description="The text at that path.")


class CheckedClaim(Contract):
    """One claim of the answer and its judgement."""

    claim_id: str = Field(description="c1, c2 ... for claims; a1 ... for recommended actions.")
    text: str = Field(description="As written in the answer.")
    span: tuple[int, int] = Field(description="Start and end offsets of `text` in the answer.")
    kind: ClaimKind = Field(description="Kind read from its wording.")
    critical: bool = Field(description="A root cause, or a finding the conclusion rests on.")
    hedged: bool = Field(description="Worded as a possibility.")
    action: bool = Field(description="A recommendation rather than a claim.")
    verification: Verification | None = Field(
        description="How it was judged; unsupported when no tool output carries its facts; "
        "None for an action, or when the run ended before the Verifier.")
    note: str | None = Field(default=None, description="Why, in one line.")
    bindings: list[ClaimBinding] = Field(description="Where its facts were found.")


class CheckReport(Contract):
    """The verdict on an imported answer, claim by claim."""

    run_id: str = Field(description="The id of the check (a run id when stored).")
    question: str = Field(description="The question the answer answers.")
    format: ImportFormat = Field(description="Where the answer came from.")
    agent: str | None = Field(default=None, description="The agent or model, if named.")
    verdict: Verdict | None = Field(description="PASS, LOW_CONFID or REJECT.")
    status: str = Field(description="SUCCESS, or FALLBACK when no conclusion survived.")
    fallback_type: FallbackType | None = Field(default=None, description="When it fell back.")
    answer: str = Field(description="The imported answer as written.")
    summary: str = Field(description="What survived, as Verity publishes it.")
    claims: list[CheckedClaim] = Field(description="Every claim and action, in order.")
    trace_id: str | None = Field(default=None, description="The source trace (otel), if any.")
    span_id: str | None = Field(default=None, description="The span that wrote the answer.")
    response_id: str | None = Field(default=None, description="The provider's response id.")
