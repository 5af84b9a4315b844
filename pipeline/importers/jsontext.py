"""What the importers share to read JSON text (RFC 8259; JSON lines as https://jsonlines.org
has them): loading with a one-line error that says where (line and column, or a path such as
`messages[3].content[1]`), nesting refused past 64 levels, a value's JSON type checked at a
named place, tool call ids held to the invocation's shape (`TOOL_CALL_ID_PATTERN`), the
messages of a chat request body (Anthropic Messages, OpenAI Chat Completions) with the
question and final answer they hold, and the ledger that pairs each call with its one
result."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from itertools import accumulate
from typing import Any, NoReturn

from models.invocation import TOOL_CALL_ID_PATTERN
from pipeline.errors import TranscriptError
from pipeline.importers.record import ImportedCall

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects an imported document may have."""

_QUOTE_CHARS = 80
_CALL_ID = re.compile(TOOL_CALL_ID_PATTERN)
_CALL_ID_MAX = 128
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def problem(where: str, text: str) -> TranscriptError:
    """The error for a problem at `where` (a place such as `line 2` or `messages[3]`, or "")."""
    return TranscriptError(f"{where}: {text}" if where else text)


def fail(where: str, text: str) -> NoReturn:
    """Raise the error for a problem at `where`."""
    raise problem(where, text)


def quote(value: object) -> str:
    """A value as a message shows it: on one line, cut after 80 characters."""
    shown = repr(value)
    return shown if len(shown) <= _QUOTE_CHARS else shown[: _QUOTE_CHARS - 1] + "…"


def kind(value: object) -> str:
    """The JSON type of a parsed value, with its article: `an object`, `a string`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def load(text: str, where: str = "", *, column_only: bool = False) -> Any:
    """Parsed JSON text. Not JSON, nested deeper than `MAX_DEPTH`, or holding a lone surrogate
    is a TranscriptError at `where`, naming the line and column (only the column for one line
    of a JSON lines file)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        fail(where, f"nests deeper than {MAX_DEPTH} levels")
    except json.JSONDecodeError as exc:
        place = f"column {exc.colno}" if column_only else f"line {exc.lineno} column {exc.colno}"
        fail(where, f"not JSON ({exc.msg} at {place})")
    except ValueError as exc:
        fail(where, f"not JSON ({_first_line(exc)})")
    if _depth(text) > MAX_DEPTH:
        fail(where, f"nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text) and not _encodable(value):
        fail(where, "has a \\u escape of a lone surrogate (not Unicode text)")
    return value


def is_json(text: str) -> bool:
    """True when `text` is one JSON value (of any depth)."""
    try:
        json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return False
    return True


def obj(value: Any, where: str) -> dict[str, Any]:
    """`value` as a JSON object, or a TranscriptError at `where`."""
    if not isinstance(value, dict):
        fail(where, f"expected an object, got {kind(value)}")
    return value


def arr(value: Any, where: str) -> list[Any]:
    """`value` as a JSON array, or a TranscriptError at `where`."""
    if not isinstance(value, list):
        fail(where, f"expected an array, got {kind(value)}")
    return value


def objects(values: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The items of the array `values` found at `where`, as (`where[i]`, the item), each
    checked to be an object as it is reached."""
    for index, value in enumerate(arr(values, where)):
        place = f"{where}[{index}]"
        yield place, obj(value, place)


def typed_objects(values: Any, where: str, *,
                  what: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The items of the array `values` as `objects` gives them, each with its `type`, a
    non-empty string (`what` names it in the error): (`where[i]`, the type, the item)."""
    for place, item in objects(values, where):
        yield place, string(item.get("type"), place, what=what), item


def string(value: Any, where: str, *, what: str) -> str:
    """`value` as a non-empty string; `what` names the field in the error."""
    if value is None:
        fail(where, f"{what} missing")
    if not isinstance(value, str):
        fail(where, f"{what} is {kind(value)}, not a string")
    if not value:
        fail(where, f"{what} is empty")
    return value


def optional_string(value: Any, where: str, *, what: str) -> str | None:
    """`value` as a string, None when absent or null."""
    if value is None:
        return None
    if not isinstance(value, str):
        fail(where, f"{what} is {kind(value)}, not a string")
    return value


def tool_call_id(value: Any, where: str, *, what: str) -> str:
    """A tool call id of the invocation's shape: 1 to 128 of `[A-Za-z0-9_-]`."""
    found = string(value, where, what=what)
    if _CALL_ID.fullmatch(found):
        return found
    if len(found) > _CALL_ID_MAX:
        fail(where, f"{what} {quote(found)} is {len(found)} characters (at most {_CALL_ID_MAX})")
    fail(where, f"{what} {quote(found)} has characters outside [A-Za-z0-9_-]")


def json_object(value: Any, where: str) -> dict[str, Any]:
    """A parsed JSON value that must be an object (tool call arguments), or a TranscriptError
    at `where`."""
    if not isinstance(value, dict):
        fail(where, f"expected a JSON object, got {kind(value)}")
    return value


def request_messages(text: str, api: str) -> tuple[Iterator[tuple[str, dict[str, Any]]],
                                                    str | None]:
    """The messages of the JSON text of an `api` request body (an object with `messages` and
    an optional `model`) or of a bare array of messages, and the model. The messages come as
    (where, the message), each checked to be an object as it is reached."""
    data = load(text)
    if isinstance(data, list):
        return objects(data, ""), None
    if not isinstance(data, dict):
        fail("", f"expected a {api} request body (an object with messages) or an array of "
                 f"messages, got {kind(data)}")
    if "messages" not in data:
        fail("", f"no messages: expected a {api} request body (an object with messages)")
    agent = optional_string(data.get("model"), "model", what="model")
    return objects(data["messages"], "messages"), agent


class Conversation:
    """The question and the final answer of a chat transcript, noted as its messages are read:
    the question is the text of the first user message, the answer the text of the last
    assistant message, which must not call tools (a run that ends on tool calls ended before
    the model answered)."""

    def __init__(self) -> None:
        self.question: str | None = None
        self._seen_user = False
        self._last: tuple[str, str, bool] | None = None

    def user(self, text: str) -> None:
        """A user message's text (the question when it is the first)."""
        if not self._seen_user:
            self.question = text.strip() or None
            self._seen_user = True

    def assistant(self, where: str, text: str, *, calls_tools: bool) -> None:
        """An assistant message at `where`: its text, and whether it calls tools."""
        self._last = (where, text, calls_tools)

    def answer(self, *, what: str) -> str:
        """The stripped text of the last assistant message; `what` names that text in the
        error when there is none."""
        if self._last is None:
            fail("", "no final answer: the transcript has no assistant message")
        where, text, calls_tools = self._last
        answer = text.strip()
        if not answer:
            fail("", f"no final answer: the last assistant message ({where}) has no {what}")
        if calls_tools:
            fail("", f"no final answer: the last assistant message ({where}) calls tools")
        return answer


class CallLedger:
    """The calls of one run in the order they were made, each answered at most once. A second
    call with an id already made is an error and never replaces the first; so is a result for
    an id no call made, or a second result for one."""

    def __init__(self, *, call_noun: str, result_noun: str, id_key: str) -> None:
        self._call_noun = call_noun
        self._result_noun = result_noun
        self._id_key = id_key
        self._calls: dict[str, ImportedCall] = {}
        self._made_at: dict[str, str] = {}
        self._answered_at: dict[str, str] = {}

    def call(self, where: str, call_id: str, tool: str, arguments: dict[str, Any]) -> None:
        """A call made at `where`, unanswered until its result comes."""
        if call_id in self._calls:
            fail(where, f"duplicate {self._call_noun} {quote(call_id)} "
                        f"(first at {self._made_at[call_id]})")
        self._calls[call_id] = ImportedCall(call_id=call_id, tool=tool, arguments=arguments,
                                            answered=False)
        self._made_at[call_id] = where

    def answer(self, where: str, call_id: str, result: Any, *, is_error: bool) -> None:
        """The result, found at `where`, of the call `call_id`."""
        if call_id not in self._calls:
            fail(where, f"{self._result_noun} for unknown {self._id_key} {quote(call_id)}")
        if call_id in self._answered_at:
            fail(where, f"second {self._result_noun} for {self._id_key} {quote(call_id)} "
                        f"(first at {self._answered_at[call_id]})")
        self._calls[call_id] = replace(self._calls[call_id], result=result, is_error=is_error,
                                       answered=True)
        self._answered_at[call_id] = where

    def calls(self) -> tuple[ImportedCall, ...]:
        """The calls in the order they were made."""
        return tuple(self._calls.values())


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in valid JSON text, in linear time."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def _encodable(value: Any) -> bool:
    """True when no string in `value` (keys included) holds a surrogate code point, which
    only a lone surrogate escape leaves there (the decoder joins a pair into one character)."""
    return not _SURROGATE.search(json.dumps(value, ensure_ascii=False))
