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
    Conversation,
    fail,
    json_object,
    kind,
    load,
    obj,
    objects,
    quote,
    request_messages,
    string,
    tool_call_id,
    typed_objects,
)
from pipeline.importers.record import ImportedRun

_INSTRUCTIONS = ("system", "developer")


def parse(text: str) -> ImportedRun:
    """The run a Chat Completions transcript records; a TranscriptError saying where when it
    is malformed, an id is missing, repeated or unknown, or there is no final answer."""
    messages, agent = request_messages(text, "Chat Completions")
    ledger = CallLedger(call_noun="tool call id", result_noun="tool message",
                        id_key="tool_call_id")
    conversation = Conversation()
    for where, message in messages:
        role = message.get("role")
        if role in _INSTRUCTIONS:
            continue
        if role == "user":
            conversation.user(_content(message.get("content"), where, nullable=False))
        elif role == "assistant":
            made = len(ledger.calls())
            _read_calls(message.get("tool_calls"), where, ledger)
            content = _content(message.get("content"), where, nullable=True)
            conversation.assistant(where, content, calls_tools=len(ledger.calls()) > made)
        elif role == "tool":
            call_id = string(message.get("tool_call_id"), where, what="tool message tool_call_id")
            result = _content(message.get("content"), where, nullable=False)
            ledger.answer(where, call_id, result, is_error=False)
        else:
            fail(f"{where}.role", f"{quote(role)} is not one of system, developer, user, "
                                  "assistant, tool")
    return ImportedRun(format="openai", answer=conversation.answer(what="text content"),
                       calls=ledger.calls(), question=conversation.question, agent=agent)


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
    for place, part_type, part in typed_objects(content, f"{where}.content", what="part type"):
        if part_type in ("text", "refusal"):
            value = part.get(part_type)
            if not isinstance(value, str):
                fail(place, f"{part_type} part's {part_type} is {kind(value)}, not a string")
            texts.append(value)
    return "\n".join(texts)


def _read_calls(tool_calls: Any, where: str, ledger: CallLedger) -> None:
    if tool_calls is None:
        return
    for place, call in objects(tool_calls, f"{where}.tool_calls"):
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
        return json_object(load(arguments, place), place)
    if isinstance(arguments, dict):
        return arguments
    fail(place, f"expected a JSON string, got {kind(arguments)}")
