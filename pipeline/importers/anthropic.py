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

Block = tuple[str, dict[str, Any]]
"""A content block and where it is (`messages[3].content[1]`)."""


def parse(text: str) -> ImportedRun:
    """The run an Anthropic Messages transcript records; a TranscriptError saying where when
    it is malformed, an id is missing, repeated or unknown, or there is no final answer."""
    messages, base, agent = _messages(load(text))
    ledger = CallLedger(call_noun="tool_use id", result_noun="tool_result", id_key="tool_use_id")
    question: str | None = None
    seen_user = False
    last: tuple[str, list[str], bool] | None = None
    for index, raw in enumerate(messages):
        where = f"{base}[{index}]"
        message = obj(raw, where)
        role = message.get("role")
        blocks = _blocks(message.get("content"), where)
        if role == "user":
            texts = _read_user(blocks, ledger)
            if not seen_user:
                question = "\n".join(texts).strip() or None
                seen_user = True
        elif role == "assistant":
            made = len(ledger.calls())
            texts = _read_assistant(blocks, ledger)
            last = (where, texts, len(ledger.calls()) > made)
        else:
            fail(f"{where}.role", f"{quote(role)} is not 'user' or 'assistant'")
    return ImportedRun(format="anthropic", answer=_answer(last), calls=ledger.calls(),
                       question=question, agent=agent)


def _messages(data: Any) -> tuple[list[Any], str, str | None]:
    """(messages, the path they are at, the model) of a request body or a bare array."""
    if isinstance(data, list):
        return data, "", None
    if not isinstance(data, dict):
        fail("", f"expected a Messages request body (an object with messages) or an array of "
                 f"messages, got {kind(data)}")
    if "messages" not in data:
        fail("", "no messages: expected a Messages request body (an object with messages)")
    agent = optional_string(data.get("model"), "model", what="model")
    return arr(data["messages"], "messages"), "messages", agent


def _blocks(content: Any, where: str) -> list[Block]:
    """A message's content as blocks: a string is one text block."""
    if content is None:
        fail(where, "content missing")
    if isinstance(content, str):
        return [(f"{where}.content", {"type": "text", "text": content})]
    blocks = []
    for index, raw in enumerate(arr(content, f"{where}.content")):
        place = f"{where}.content[{index}]"
        block = obj(raw, place)
        string(block.get("type"), place, what="block type")
        blocks.append((place, block))
    return blocks


def _read_user(blocks: list[Block], ledger: CallLedger) -> list[str]:
    """The texts of a user message; its tool results go to the ledger."""
    texts = []
    for where, block in blocks:
        match block["type"]:
            case "text":
                texts.append(_text(block, where))
            case "tool_result":
                _read_result(block, where, ledger)
            case "tool_use":
                fail(where, "tool_use in a user message")
    return texts


def _read_assistant(blocks: list[Block], ledger: CallLedger) -> list[str]:
    """The texts of an assistant message; its tool calls go to the ledger."""
    texts = []
    for where, block in blocks:
        match block["type"]:
            case "text":
                texts.append(_text(block, where))
            case "tool_use":
                call_id = tool_call_id(block.get("id"), where, what="tool_use id")
                name = string(block.get("name"), where, what="tool_use name")
                if "input" not in block:
                    fail(where, f"tool_use {quote(call_id)} has no input")
                arguments = obj(block["input"], f"{where}.input")
                ledger.call(where, call_id, name, arguments)
            case "tool_result":
                fail(where, "tool_result in an assistant message")
    return texts


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
    texts = []
    for index, raw in enumerate(arr(content, f"{where}.content")):
        place = f"{where}.content[{index}]"
        block = obj(raw, place)
        if string(block.get("type"), place, what="block type") == "text":
            texts.append(_text(block, place))
    return "\n".join(texts)


def _text(block: dict[str, Any], where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        fail(where, f"text block's text is {kind(text)}, not a string")
    return text


def _answer(last: tuple[str, list[str], bool] | None) -> str:
    """The text of the last assistant message, which must not call tools (a run that ends on
    tool calls ended before the model answered)."""
    if last is None:
        fail("", "no final answer: the transcript has no assistant message")
    where, texts, calls_tools = last
    answer = "\n".join(texts).strip()
    if not answer:
        fail("", f"no final answer: the last assistant message ({where}) has no text")
    if calls_tools:
        fail("", f"no final answer: the last assistant message ({where}) calls tools")
    return answer
