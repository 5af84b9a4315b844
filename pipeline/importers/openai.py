"""Reads an OpenAI Chat Completions conversation into an `ImportedRun`: a request body
(`{"model", "messages"}`) or a bare array of messages, as the Chat Completions API documents
them (https://platform.openai.com/docs/api-reference/chat/create; tool calls as in
https://platform.openai.com/docs/guides/function-calling).

Each assistant `tool_calls[]` entry (`{id, type: "function", function: {name, arguments}}`,
`arguments` a JSON string) is a call; the `role: "tool"` message with its `tool_call_id` is its
result (`content` a string or text parts). The question is the first user message's text
(system and developer messages are left out), the answer the content of the last assistant
message (which calls no tools). Chat Completions has no error flag on a tool result:
`is_error` stays False."""

from __future__ import annotations

from typing import Any

from pipeline.importers.jsontext import (
    CallLedger,
    arr,
    fail,
    kind,
    load,
    obj,
    optional_string,
    quote,
    string,
    tool_call_id,
)
from pipeline.importers.record import ImportedRun

_INSTRUCTIONS = ("system", "developer")


def parse(text: str) -> ImportedRun:
    """The run a Chat Completions transcript records; a TranscriptError saying where when it
    is malformed, an id is missing, repeated or unknown, or there is no final answer."""
    messages, base, agent = _messages(load(text))
    ledger = CallLedger(call_noun="tool call id", result_noun="tool message",
                        id_key="tool_call_id")
    question: str | None = None
    seen_user = False
    last: tuple[str, str, bool] | None = None
    for index, raw in enumerate(messages):
        where = f"{base}[{index}]"
        message = obj(raw, where)
        role = message.get("role")
        if role in _INSTRUCTIONS:
            continue
        if role == "user":
            text = _content(message.get("content"), where, nullable=False)
            if not seen_user:
                question = text.strip() or None
                seen_user = True
        elif role == "assistant":
            made = len(ledger.calls())
            _read_calls(message.get("tool_calls"), where, ledger)
            content = _content(message.get("content"), where, nullable=True)
            last = (where, content, len(ledger.calls()) > made)
        elif role == "tool":
            call_id = string(message.get("tool_call_id"), where, what="tool message tool_call_id")
            result = _content(message.get("content"), where, nullable=False)
            ledger.answer(where, call_id, result, is_error=False)
        else:
            fail(f"{where}.role", f"{quote(role)} is not one of system, developer, user, "
                                  "assistant, tool")
    return ImportedRun(format="openai", answer=_answer(last), calls=ledger.calls(),
                       question=question, agent=agent)


def _messages(data: Any) -> tuple[list[Any], str, str | None]:
    """(messages, the path they are at, the model) of a request body or a bare array."""
    if isinstance(data, list):
        return data, "", None
    if not isinstance(data, dict):
        fail("", f"expected a Chat Completions request body (an object with messages) or an "
                 f"array of messages, got {kind(data)}")
    if "messages" not in data:
        fail("", "no messages: expected a Chat Completions request body (an object with "
                 "messages)")
    agent = optional_string(data.get("model"), "model", what="model")
    return arr(data["messages"], "messages"), "messages", agent


def _content(content: Any, where: str, *, nullable: bool) -> str:
    """A message's content as text: a string as is, or its text (and refusal) parts joined
    with newlines; other parts (images, audio, files) are left out."""
    if content is None:
        if nullable:
            return ""
        fail(where, "content missing")
    if isinstance(content, str):
        return content
    texts = []
    for index, raw in enumerate(arr(content, f"{where}.content")):
        place = f"{where}.content[{index}]"
        part = obj(raw, place)
        part_type = string(part.get("type"), place, what="part type")
        if part_type in ("text", "refusal"):
            value = part.get(part_type)
            if not isinstance(value, str):
                fail(place, f"{part_type} part's {part_type} is {kind(value)}, not a string")
            texts.append(value)
    return "\n".join(texts)


def _read_calls(tool_calls: Any, where: str, ledger: CallLedger) -> None:
    if tool_calls is None:
        return
    for index, raw in enumerate(arr(tool_calls, f"{where}.tool_calls")):
        place = f"{where}.tool_calls[{index}]"
        call = obj(raw, place)
        call_id = tool_call_id(call.get("id"), place, what="tool call id")
        call_type = call.get("type", "function")
        if call_type != "function":
            fail(place, f"tool call {quote(call_id)} has type {quote(call_type)}, not 'function'")
        function = obj(call.get("function"), f"{place}.function")
        name = string(function.get("name"), f"{place}.function", what="name")
        arguments = _arguments(function.get("arguments"),
                               f"{place}.function.arguments (call {call_id}, {quote(name)})")
        ledger.call(place, call_id, name, arguments)


def _arguments(arguments: Any, place: str) -> dict[str, Any]:
    """`function.arguments`: a JSON string holding an object (an object as such is taken)."""
    if isinstance(arguments, str):
        arguments = load(arguments, place)
        if not isinstance(arguments, dict):
            fail(place, f"expected a JSON object, got {kind(arguments)}")
        return arguments
    if isinstance(arguments, dict):
        return arguments
    fail(place, f"expected a JSON string, got {kind(arguments)}")


def _answer(last: tuple[str, str, bool] | None) -> str:
    """The content of the last assistant message, which must not call tools (a run that ends
    on tool calls ended before the model answered)."""
    if last is None:
        fail("", "no final answer: the transcript has no assistant message")
    where, content, calls_tools = last
    answer = content.strip()
    if not answer:
        fail("", f"no final answer: the last assistant message ({where}) has no text content")
    if calls_tools:
        fail("", f"no final answer: the last assistant message ({where}) calls tools")
    return answer
