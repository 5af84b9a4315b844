"""Reads an Anthropic Messages API conversation into an `ImportedRun`: a request body
(`{"model", "system", "messages"}`) or a bare array of messages, as the Messages API documents
them (https://platform.claude.com/docs/en/api/messages; tool blocks as in
https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls).

A message's `content` is a string or a list of blocks. Each assistant `tool_use` block is a
call; the user `tool_result` block with its `tool_use_id` is its result (`content` a string or
blocks whose `text` blocks are joined with newlines; `is_error` kept). The question is the text
of the first user message, the answer the text of the last assistant message (which calls no
tools). Thinking, server tool and media blocks are left out."""

from __future__ import annotations

from typing import Any

from pipeline.importers.jsontext import (
    CallLedger,
    Conversation,
    fail,
    kind,
    obj,
    quote,
    request_messages,
    string,
    tool_call_id,
    typed_objects,
)
from pipeline.importers.record import ImportedRun

Block = tuple[str, dict[str, Any]]
"""A content block and where it is (`messages[3].content[1]`)."""

_ROLES = ("user", "assistant")
_MISPLACED = {"user": ("tool_use", "a user message"),
              "assistant": ("tool_result", "an assistant message")}
"""The tool block a role's message may not hold, and that message as an error names it."""


def parse(text: str) -> ImportedRun:
    """The run an Anthropic Messages transcript records; a TranscriptError saying where when
    it is malformed, an id is missing, repeated or unknown, or there is no final answer."""
    messages, agent = request_messages(text, "Messages")
    ledger = CallLedger(call_noun="tool_use id", result_noun="tool_result", id_key="tool_use_id")
    conversation = Conversation()
    for where, message in messages:
        role = message.get("role")
        blocks = _blocks(message.get("content"), where)
        if role not in _ROLES:
            fail(f"{where}.role", f"{quote(role)} is not 'user' or 'assistant'")
        made = len(ledger.calls())
        said = "\n".join(_read_blocks(blocks, role, ledger))
        if role == "assistant":
            conversation.assistant(where, said, calls_tools=len(ledger.calls()) > made)
        else:
            conversation.user(said)
    return ImportedRun(format="anthropic", answer=conversation.answer(what="text"),
                       calls=ledger.calls(), question=conversation.question, agent=agent)


def _blocks(content: Any, where: str) -> list[Block]:
    """A message's content as blocks: a string is one text block."""
    if content is None:
        fail(where, "content missing")
    if isinstance(content, str):
        return [(f"{where}.content", {"type": "text", "text": content})]
    return [(place, block)
            for place, _, block in typed_objects(content, f"{where}.content", what="block type")]


def _read_blocks(blocks: list[Block], role: str, ledger: CallLedger) -> list[str]:
    """The texts of a `role` message; its tool calls (an assistant's) or tool results (a
    user's) go to the ledger, and the other kind of tool block is an error."""
    misplaced, message = _MISPLACED[role]
    texts = []
    for where, block in blocks:
        if block["type"] == misplaced:
            fail(where, f"{misplaced} in {message}")
        match block["type"]:
            case "text":
                texts.append(_text(block, where))
            case "tool_use":
                _read_use(block, where, ledger)
            case "tool_result":
                _read_result(block, where, ledger)
    return texts


def _read_use(block: dict[str, Any], where: str, ledger: CallLedger) -> None:
    call_id = tool_call_id(block.get("id"), where, what="tool_use id")
    name = string(block.get("name"), where, what="tool_use name")
    if "input" not in block:
        fail(where, f"tool_use {quote(call_id)} has no input")
    ledger.call(where, call_id, name, obj(block["input"], f"{where}.input"))


def _read_result(block: dict[str, Any], where: str, ledger: CallLedger) -> None:
    call_id = string(block.get("tool_use_id"), where, what="tool_result tool_use_id")
    is_error = block.get("is_error", False)
    if is_error is None:
        is_error = False
    if not isinstance(is_error, bool):
        fail(f"{where}.is_error", f"expected a boolean, got {kind(is_error)}")
    ledger.answer(where, call_id, _result_text(block.get("content"), where), is_error=is_error)


def _result_text(content: Any, where: str) -> str:
    """A tool_result's content as text: a string as is, or its text blocks joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    blocks = typed_objects(content, f"{where}.content", what="block type")
    return "\n".join(_text(block, place) for place, type_, block in blocks if type_ == "text")


def _text(block: dict[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        fail(where, f"text block's text is {kind(text)}, not a string")
    return text
