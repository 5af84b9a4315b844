"""Scripted replies: their accepted forms, checked when scripted, and the messages they become.

A reply is one of
- a string: a text reply (`stop_reason` end_turn);
- `{"text": "..."}`: the same, as a dict;
- `{"tool_use": {"name": ..., "input": {...}}}` or `{"tool_use": [{...}, ...]}`: one or several
  tool_use blocks, `stop_reason` tool_use; a `"text"` beside it becomes a text block before them;
  a tool_use may carry its own `"id"`, else the server mints one (`toolu_01` + 22 base62 chars);
- `{"content": [blocks...]}`: the content blocks as given (tool_use blocks without an id get one);
- `{"body": {...}}`: a raw response body, sent back exactly as given (status 200).
Every form but `body` accepts `"stop_reason"` (end_turn, tool_use, max_tokens, refusal,
pause_turn, stop_sequence), `"stop_sequence"` and `"usage"` (fields that override the computed
usage).
"""

from __future__ import annotations

import random
import string
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from fake_anthropic.tokens import JSON, InputUsage, estimate_tokens

STOP_REASONS = frozenset(
    {"end_turn", "tool_use", "max_tokens", "refusal", "pause_turn", "stop_sequence"}
)
_REPLY_KEYS = frozenset({"text", "tool_use", "content", "stop_reason", "stop_sequence", "usage"})
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase


class ReplyError(ValueError):
    """A scripted reply (or a default responder's answer) that is not one of the known forms."""


class IdMint:
    """Mints ids of the real shapes (`msg_01…`, `toolu_01…`, `req_01…`), unique per server."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def mint(self, prefix: str) -> str:
        """`prefix` + "_01" + 22 base62 characters, never returned twice by this mint."""
        with self._lock:
            while True:
                tail = "".join(self._random.choices(_BASE62, k=22))
                minted = f"{prefix}_01{tail}"
                if minted not in self._seen:
                    self._seen.add(minted)
                    return minted


def check_reply(reply: object) -> None:
    """Raise ReplyError unless `reply` is one of the accepted forms."""
    if isinstance(reply, str):
        return
    if not isinstance(reply, Mapping):
        raise ReplyError(f"a reply is a string or an object, not {type(reply).__name__}")
    if "body" in reply:
        if set(reply) != {"body"} or not isinstance(reply["body"], Mapping):
            raise ReplyError("a raw reply is exactly {'body': {...}}")
        return
    unknown = set(reply) - _REPLY_KEYS
    if unknown:
        raise ReplyError(f"unknown reply keys: {sorted(unknown)}")
    if not {"text", "tool_use", "content"} & set(reply):
        raise ReplyError("a reply needs 'text', 'tool_use', 'content' or 'body'")
    if "content" in reply and {"text", "tool_use"} & set(reply):
        raise ReplyError("'content' excludes 'text' and 'tool_use'")
    for use in _tool_uses(reply.get("tool_use")):
        if not isinstance(use, Mapping) or not isinstance(use.get("name"), str):
            raise ReplyError("a tool_use needs a string 'name'")
        if not isinstance(use.get("input", {}), Mapping):
            raise ReplyError("a tool_use 'input' is an object")
    if reply.get("stop_reason", "end_turn") not in STOP_REASONS:
        raise ReplyError(f"unknown stop_reason {reply.get('stop_reason')!r}")


def _tool_uses(value: object) -> Sequence[Any]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return value
    raise ReplyError("'tool_use' is an object or a list of objects")


def _content(reply: Mapping[str, Any], mint: IdMint) -> list[JSON]:
    if "content" in reply:
        blocks = [dict(block) for block in reply["content"]]
    else:
        blocks = [{"type": "text", "text": reply["text"]}] if "text" in reply else []
        blocks += [{"type": "tool_use", **use} for use in _tool_uses(reply.get("tool_use"))]
    return [_with_id(block, mint) if block.get("type") == "tool_use" else block for block in blocks]


def _with_id(block: JSON, mint: IdMint) -> JSON:
    """A tool_use block in the real key order, its id minted unless given."""
    head = {
        "type": "tool_use",
        "id": block.get("id") or mint.mint("toolu"),
        "name": block["name"],
        "input": block.get("input", {}),
    }
    return head | {k: v for k, v in block.items() if k not in head}


def build_message(reply: object, *, request: JSON, usage: InputUsage, mint: IdMint) -> JSON:
    """The response body for a checked reply to `request`."""
    check_reply(reply)
    if isinstance(reply, str):
        reply = {"text": reply}
    assert isinstance(reply, Mapping)
    if "body" in reply:
        return dict(reply["body"])
    content = _content(reply, mint)
    has_tool_use = any(block.get("type") == "tool_use" for block in content)
    stop_reason = reply.get("stop_reason", "tool_use" if has_tool_use else "end_turn")
    return {
        "id": mint.mint("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model"),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": reply.get("stop_sequence"),
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": estimate_tokens(content),
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
        }
        | dict(reply.get("usage") or {}),
    }
