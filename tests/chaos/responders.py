"""Fake-server responders for the drills (they run inside the fake server's process).

`executor_duplicate_ids`: the Executor's first turn asks for its first two tool calls under one
`tool_use` id (two different calls, one id); later turns answer as Claude would, from the
conversation with the repeated blocks left out.
"""

from __future__ import annotations

import copy
import random
import string
from typing import Any

from tests.providers import claude_like

JSON = dict[str, Any]
_BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
_random = random.SystemRandom()


def _tool_use_id() -> str:
    return "toolu_01" + "".join(_random.choices(_BASE62, k=22))


def executor_duplicate_ids(request: JSON) -> JSON:
    """Two tool_use blocks with one id in the first turn; Claude-like afterwards."""
    if len(request["messages"]) == 1:
        reply = claude_like.executor(request)
        uses = reply.get("tool_use")
        if isinstance(uses, list) and len(uses) >= 2:
            shared = _tool_use_id()
            return {"tool_use": [{**use, "id": shared} if i < 2 else use
                                 for i, use in enumerate(uses)]}
        return reply
    return claude_like.executor(_first_of_each_id(request))


def _first_of_each_id(request: JSON) -> JSON:
    """The request with every repeated tool_use (and tool_result) id after its first dropped,
    so the Claude-like executor can rebuild its transcript."""
    cleaned = copy.deepcopy(request)
    for message in cleaned["messages"]:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        seen: set[str] = set()
        kept = []
        for block in content:
            key = block.get("id") if block.get("type") == "tool_use" else (
                block.get("tool_use_id") if block.get("type") == "tool_result" else None)
            if key is not None and key in seen:
                continue
            if key is not None:
                seen.add(key)
            kept.append(block)
        message["content"] = kept
    return cleaned
