"""What every importer reads out of another agent's run, whatever its format: the question (when
the source has one), the tool calls with their results, and the final answer as written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["anthropic", "openai", "otel", "files"]
"""The public formats an imported run comes from."""

FORMATS: tuple[Format, ...] = ("anthropic", "openai", "otel", "files")


@dataclass(frozen=True, slots=True)
class ImportedCall:
    """One tool call of the source run, as its format records it.

    `call_id` is the source's own id (`tool_use.id`, `tool_calls[].id`, `gen_ai.tool.call.id`,
    or for plain files one made from the file's name); it becomes the invocation's
    `tool_call_id` unchanged. `result` is what the tool returned: text (a `str`, kept as
    written: log lines, kubectl output) or JSON already parsed (a dict, list or scalar); None
    with `answered=False` when the source holds no result for the call."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    result: Any = None
    is_error: bool = False
    answered: bool = True


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """Another agent's run: its final answer, the calls it made, in the order it made them."""

    format: Format
    answer: str
    calls: tuple[ImportedCall, ...]
    question: str | None = None
    agent: str | None = None
    """The model or agent that wrote the answer, when the source names it."""
    trace_id: str | None = None
    """The trace of a run imported from OpenTelemetry (32 hex digits)."""
    span_id: str | None = None
    """The span that wrote the answer (16 hex digits): evaluation events are parented to it."""
    response_id: str | None = None
    """The provider's id of the response that holds the answer, when the source has it."""
