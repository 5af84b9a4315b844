"""The request checks the real Messages API makes and Verity's callers could get wrong.

Each check returns the real API's kind of message (`messages.2.content.0: ...`) or None. The
tool_use / tool_result pairing rules are the ones that catch bugs in an agent loop: every
tool_result must answer a tool_use of the assistant message just before it, every tool_use must
be answered in the user message just after it, and tool_use ids are unique in a conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fake_anthropic.tokens import JSON

_ROLES = ("user", "assistant")


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _ids(message: Mapping[str, Any], block_type: str, key: str) -> list[str]:
    return [
        str(block.get(key))
        for block in _blocks(message)
        if isinstance(block, Mapping) and block.get("type") == block_type
    ]


def _check_top_level(body: JSON) -> str | None:
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a non-empty string"
    max_tokens = body["max_tokens"]
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Input should be an integer greater than or equal to 1"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: at least one message is required"
    system = body.get("system")
    if system is not None and not isinstance(system, str | list):
        return "system: Input should be a string or a list of text blocks"
    if isinstance(system, list) and not all(
        isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in system
    ):
        return "system: every block must be a text block"
    return None


def _check_tools(body: JSON) -> str | None:
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        return "tools: Input should be a list"
    names = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            return f"tools.{index}.name: Field required"
        if "type" not in tool and not isinstance(tool.get("input_schema"), Mapping):
            return f"tools.{index}.custom.input_schema: Field required"
        names.append(tool["name"])
    if len(set(names)) != len(names):
        return "tools: Tool names must be unique."
    choice = body.get("tool_choice")
    if choice is None:
        return None
    if not isinstance(choice, Mapping) or choice.get("type") not in ("auto", "any", "tool", "none"):
        return "tool_choice: Input tag must be one of 'auto', 'any', 'tool', 'none'"
    if choice["type"] == "tool" and choice.get("name") not in names:
        return f"tool_choice: Tool '{choice.get('name')}' not found in tools"
    return None


def _check_message_shapes(messages: list[Any]) -> str | None:
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") not in _ROLES:
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if not isinstance(content, str | list):
            return f"messages.{index}.content: Input should be a string or a list of blocks"
        for number, block in enumerate(_blocks(message)):
            if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                return f"messages.{index}.content.{number}.type: Field required"
    return None


def _check_tool_results(messages: list[Mapping[str, Any]]) -> str | None:
    for index, message in enumerate(messages):
        results = _ids(message, "tool_result", "tool_use_id")
        if not results:
            continue
        previous = messages[index - 1] if index else None
        expected = (
            set(_ids(previous, "tool_use", "id"))
            if previous and previous["role"] == "assistant"
            else set()
        )
        stray = [r for r in results if r not in expected]
        if stray or message["role"] != "user":
            return (
                f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {', '.join(stray or results)}. Each `tool_result` block must have "
                "a corresponding `tool_use` block in the previous message."
            )
    return None


def _check_tool_uses(messages: list[Mapping[str, Any]]) -> str | None:
    seen: set[str] = set()
    for index, message in enumerate(messages):
        uses = _ids(message, "tool_use", "id") if message["role"] == "assistant" else []
        duplicate = next((i for i in uses if i in seen or uses.count(i) > 1), None)
        if duplicate is not None:
            return f"messages.{index}: `tool_use` ids must be unique: {duplicate}"
        seen.update(uses)
        if uses and index + 1 < len(messages):
            answered = set(_ids(messages[index + 1], "tool_result", "tool_use_id"))
            missing = [u for u in uses if u not in answered]
            if missing:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
    return None


def validate_request(body: object) -> str | None:
    """The invalid_request_error message for a Messages API body, or None when it is valid."""
    if not isinstance(body, Mapping):
        return "The request body is not a JSON object"
    body = dict(body)
    return (
        _check_top_level(body)
        or _check_tools(body)
        or _check_message_shapes(body["messages"])
        or _check_tool_results(body["messages"])
        or _check_tool_uses(body["messages"])
    )
