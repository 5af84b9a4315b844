"""Reads one trace of an agent, recorded with the OpenTelemetry GenAI semantic conventions, into
an `ImportedRun`. The file is OTLP JSON as the Collector's file exporter writes it, one
`{"resourceSpans": [...]}` object a line, or one pretty-printed object:
https://opentelemetry.io/docs/specs/otel/protocol/file-exporter/ (JSON lines) and
https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding (the encoding).

Each span whose `gen_ai.operation.name` is `execute_tool` is a call
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/#execute-tool-span):
`gen_ai.tool.call.id`, `gen_ai.tool.name`, `gen_ai.tool.call.arguments`, and the result from
`gen_ai.tool.call.result`, else from the `tool_call_response` part with that id in a chat span's
`gen_ai.input.messages` (the parts-based messages of gen-ai-input-messages.json), else from the
span's error; a span with status ERROR or an `error.type` failed. Calls are in start order.
The question is the first user text of the earliest chat span, the answer the assistant text of
the last chat span (by end time) whose `gen_ai.output.messages` has text (and no tool calls)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pipeline.importers.jsontext import (
    arr,
    fail,
    is_json,
    json_object,
    kind,
    load,
    obj,
    objects,
    optional_string,
    quote,
    string,
    tool_call_id,
    typed_objects,
)
from pipeline.importers.record import ImportedCall, ImportedRun

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
CALL_ID = "gen_ai.tool.call.id"
ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
CHAT_OPERATIONS = ("chat", "generate_content", "text_completion")
"""The inference operations whose spans carry the messages sent to and returned by a model."""

_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_STATUS_OTHER = (0, 1, "STATUS_CODE_UNSET", "STATUS_CODE_OK")
_INTEGER = re.compile(r"-?[0-9]+")
_SHOWN_TRACES = 3


@dataclass(frozen=True, slots=True)
class _Span:
    where: str
    trace_id: str
    span_id: str
    start: int
    end: int
    attributes: dict[str, Any]
    failed: bool
    error_text: str


@dataclass(frozen=True, slots=True)
class _Message:
    where: str
    role: str
    parts: list[tuple[str, dict[str, Any]]]

    def text(self) -> str:
        return "\n".join(part["content"] for _, part in self.parts
                         if part["type"] == "text").strip()

    def calls_tools(self) -> bool:
        return any(part["type"] == "tool_call" for _, part in self.parts)


@dataclass(frozen=True, slots=True)
class _Chat:
    span: _Span
    inputs: list[_Message]
    outputs: list[_Message]


def parse(text: str) -> ImportedRun:
    """The run one OTLP JSON trace records; a TranscriptError saying where when it is
    malformed, holds more than one trace, a call id is missing or repeated, or no chat span
    has a final answer."""
    spans = [span for where, document in _documents(text) for span in _spans(document, where)]
    if not spans:
        fail("", "no spans: the file holds no resourceSpans[].scopeSpans[].spans[]")
    traces = list(dict.fromkeys(span.trace_id for span in spans))
    if len(traces) > 1:
        shown = ", ".join(quote(trace) for trace in traces[:_SHOWN_TRACES])
        more = ", …" if len(traces) > _SHOWN_TRACES else ""
        fail("", f"the file holds {len(traces)} traces; import one (trace ids {shown}{more})")
    ordered = sorted(spans, key=lambda span: span.start)
    chats = [_chat(span) for span in ordered if span.attributes.get(OPERATION) in CHAT_OPERATIONS]
    responses = _responses(chats)
    calls: dict[str, ImportedCall] = {}
    made_at: dict[str, str] = {}
    for span in ordered:
        if span.attributes.get(OPERATION) != "execute_tool":
            continue
        call = _call(span, responses)
        if call.call_id in calls:
            fail(span.where, f"duplicate {CALL_ID} {quote(call.call_id)} "
                             f"(first at {made_at[call.call_id]})")
        calls[call.call_id] = call
        made_at[call.call_id] = span.where
    answer, chat = _answer(chats)
    response_id = optional_string(chat.span.attributes.get("gen_ai.response.id"),
                                  chat.span.where, what="gen_ai.response.id")
    return ImportedRun(format="otel", answer=answer, calls=tuple(calls.values()),
                       question=_question(chats), agent=_model(chat.span),
                       trace_id=chat.span.trace_id or None, span_id=chat.span.span_id or None,
                       response_id=response_id or None)


def _documents(text: str) -> list[tuple[str, Any]]:
    """(where, parsed object) of each line of a JSON lines file, or of the one document."""
    lines = [(number, line) for number, line in enumerate(text.split("\n"), start=1)
             if line.strip()]
    if not lines:
        fail("", "empty file: no OTLP JSON")
    if not is_json(lines[0][1]):
        return [("", load(text))]
    return [(f"line {number}", load(line, f"line {number}", column_only=True))
            for number, line in lines]


def _spans(document: Any, where: str) -> Iterator[_Span]:
    """The spans of one TracesData object."""
    data = obj(document, where)
    if "resourceSpans" not in data:
        other = [key for key in ("resourceMetrics", "resourceLogs") if key in data]
        found = f"{other[0]}, not traces" if other else "no resourceSpans"
        fail(where, f"not OTLP trace data ({found})")
    prefix = f"{where}: " if where else ""
    for resource_at, resource in objects(data["resourceSpans"], f"{prefix}resourceSpans"):
        for scope_at, scope in objects(resource.get("scopeSpans", []),
                                       f"{resource_at}.scopeSpans"):
            for span_at, span in objects(scope.get("spans", []), f"{scope_at}.spans"):
                yield _span(span, span_at)


def _span(span: dict[str, Any], where: str) -> _Span:
    name = optional_string(span.get("name"), where, what="name")
    if name:
        where = f"{where} ({quote(name)})"
    trace_id = span.get("traceId", "")
    if not isinstance(trace_id, str):
        fail(f"{where}.traceId", f"expected a string, got {kind(trace_id)}")
    span_id = span.get("spanId", "")
    if not isinstance(span_id, str):
        fail(f"{where}.spanId", f"expected a string, got {kind(span_id)}")
    attributes = _attributes(span.get("attributes"), where)
    failed, message = _status(span.get("status"), where)
    return _Span(where=where, trace_id=trace_id, span_id=span_id,
                 start=_nanos(span.get("startTimeUnixNano"), f"{where}.startTimeUnixNano"),
                 end=_nanos(span.get("endTimeUnixNano"), f"{where}.endTimeUnixNano"),
                 attributes=attributes, failed=failed or ERROR_TYPE in attributes,
                 error_text=message or _exception_message(span.get("events"), where)
                 or _text_of(attributes.get(ERROR_TYPE)))


def _attributes(raw: Any, where: str) -> dict[str, Any]:
    """OTLP `attributes` (`[{key, value: AnyValue}]`) as a dict of plain JSON values."""
    if raw is None:
        return {}
    attributes: dict[str, Any] = {}
    for place, pair in objects(raw, f"{where}.attributes"):
        key = string(pair.get("key"), place, what="key")
        attributes[key] = _value(pair.get("value"), f"{place} ({quote(key)})")
    return attributes


def _value(raw: Any, where: str) -> Any:
    """An OTLP AnyValue as a plain JSON value: kvlists are objects, arrays lists."""
    if raw is None:
        return None
    value = obj(raw, where)
    if not value:
        return None
    for key, convert in _CONVERTERS.items():
        if key in value:
            return convert(value[key], f"{where}.{key}")
    fail(where, f"no AnyValue field (found {quote(sorted(value))})")


def _string_value(raw: Any, where: str) -> str:
    if not isinstance(raw, str):
        fail(where, f"expected a string, got {kind(raw)}")
    return raw


def _bool_value(raw: Any, where: str) -> bool:
    if not isinstance(raw, bool):
        fail(where, f"expected a boolean, got {kind(raw)}")
    return raw


def _int_value(raw: Any, where: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and _INTEGER.fullmatch(raw) and len(raw) <= 20:
        return int(raw)
    fail(where, f"expected an integer, got {quote(raw) if isinstance(raw, str) else kind(raw)}")


def _double_value(raw: Any, where: str) -> float:
    number: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        number = float(raw)
    elif isinstance(raw, str):
        try:
            number = float(raw)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        shown = quote(raw) if isinstance(raw, str) else kind(raw)
        fail(where, f"expected a finite number, got {shown}")
    return number


def _array_value(raw: Any, where: str) -> list[Any]:
    values = obj(raw, where).get("values", [])
    return [_value(item, f"{where}.values[{index}]")
            for index, item in enumerate(arr(values, f"{where}.values"))]


def _kvlist_value(raw: Any, where: str) -> dict[str, Any]:
    return _attributes(obj(raw, where).get("values", []), where)


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "stringValue": _string_value,
    "boolValue": _bool_value,
    "intValue": _int_value,
    "doubleValue": _double_value,
    "arrayValue": _array_value,
    "kvlistValue": _kvlist_value,
    "bytesValue": _string_value,
}


def _nanos(raw: Any, where: str) -> int:
    """A fixed64 timestamp: a decimal string or a number; absent is 0 (proto3 JSON)."""
    if raw is None:
        return 0
    nanos = _int_value(raw, where)
    if nanos < 0:
        fail(where, f"is negative ({nanos})")
    return nanos


def _status(raw: Any, where: str) -> tuple[bool, str]:
    """(ended in error, the status message) of a span's `status`."""
    if raw is None:
        return False, ""
    status = obj(raw, f"{where}.status")
    code = status.get("code", 0)
    if code not in _STATUS_ERROR and code not in _STATUS_OTHER:
        fail(f"{where}.status.code", f"{quote(code)} is not 0, 1, 2 or a STATUS_CODE_ name")
    message = optional_string(status.get("message"), f"{where}.status", what="message")
    return code in _STATUS_ERROR, message or ""


def _exception_message(raw: Any, where: str) -> str:
    """The `exception.message` of the span's first `exception` event, or ""."""
    if raw is None:
        return ""
    for place, event in objects(raw, f"{where}.events"):
        if event.get("name") == "exception":
            message = _attributes(event.get("attributes"), place).get("exception.message")
            if message:
                return _text_of(message)
    return ""


def _text_of(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else repr(value)


def _chat(span: _Span) -> _Chat:
    return _Chat(span=span, inputs=_messages(span, INPUT_MESSAGES),
                 outputs=_messages(span, OUTPUT_MESSAGES))


def _messages(span: _Span, key: str) -> list[_Message]:
    """A chat span's parts-based messages (`[{role, parts: [{type, ...}]}]`), given as a
    JSON string or as a structured value."""
    raw = span.attributes.get(key)
    if raw is None:
        return []
    where = f"{span.where}: {key}"
    if isinstance(raw, str):
        raw = load(raw, where)
    messages = []
    for place, message in objects(raw, where):
        role = string(message.get("role"), place, what="role")
        parts = []
        for part_at, part_type, part in typed_objects(message.get("parts"), f"{place}.parts",
                                                      what="part type"):
            if part_type == "text" and not isinstance(part.get("content"), str):
                fail(part_at, f"text part's content is {kind(part.get('content'))}, "
                              "not a string")
            if part_type == "tool_call_response" and "response" not in part:
                fail(part_at, "tool_call_response part has no response")
            parts.append((part_at, part))
        messages.append(_Message(where=place, role=role, parts=parts))
    return messages


def _responses(chats: list[_Chat]) -> dict[str, Any]:
    """The first `tool_call_response` for each tool call id in the chat spans' inputs (each
    later chat span repeats the history)."""
    responses: dict[str, Any] = {}
    for chat in chats:
        for message in chat.inputs:
            for _, part in message.parts:
                if part["type"] == "tool_call_response" and isinstance(part.get("id"), str):
                    responses.setdefault(part["id"], part["response"])
    return responses


def _call(span: _Span, responses: dict[str, Any]) -> ImportedCall:
    attributes = span.attributes
    call_id = tool_call_id(attributes.get(CALL_ID), span.where, what=CALL_ID)
    tool = string(attributes.get(TOOL_NAME), span.where, what=TOOL_NAME)
    arguments = _arguments(attributes.get(ARGUMENTS), f"{span.where}: {ARGUMENTS}")
    base = ImportedCall(call_id=call_id, tool=tool, arguments=arguments, is_error=span.failed)
    if RESULT in attributes:
        return _with_result(base, attributes[RESULT])
    if call_id in responses:
        return _with_result(base, responses[call_id])
    if span.failed:
        return _with_result(base, span.error_text)
    return ImportedCall(call_id=call_id, tool=tool, arguments=arguments, is_error=False,
                        result=None, answered=False)


def _with_result(call: ImportedCall, result: Any) -> ImportedCall:
    return ImportedCall(call_id=call.call_id, tool=call.tool, arguments=call.arguments,
                        result=result, is_error=call.is_error)


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    """`gen_ai.tool.call.arguments`: a JSON string or a structured value holding an object."""
    if raw is None:
        return {}
    return json_object(load(raw, where) if isinstance(raw, str) else raw, where)


def _question(chats: list[_Chat]) -> str | None:
    if not chats:
        return None
    for message in chats[0].inputs:
        if message.role == "user":
            return message.text() or None
    return None


def _answer(chats: list[_Chat]) -> tuple[str, _Chat]:
    """(the final answer, the chat span that wrote it): the last chat span to end with text."""
    for chat in sorted(chats, key=lambda chat: chat.span.end, reverse=True):
        for message in chat.outputs:
            text = message.text() if message.role == "assistant" else ""
            if text and message.calls_tools():
                fail("", f"no final answer: the last assistant text ({message.where}) "
                         "comes with tool calls")
            if text:
                return text, chat
    fail("", f"no final answer: no chat span's {OUTPUT_MESSAGES} holds assistant text")


def _model(span: _Span) -> str | None:
    for key in ("gen_ai.response.model", "gen_ai.request.model"):
        model = optional_string(span.attributes.get(key), span.where, what=key)
        if model:
            return model
    return None
