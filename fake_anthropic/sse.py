"""A finished message as the real API streams it (`"stream": true`): server-sent events."""

from __future__ import annotations

import json
from typing import Any

from fake_anthropic.tokens import JSON


def _event(name: str, data: JSON) -> str:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _start_block(block: JSON) -> JSON:
    if block.get("type") == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    if block.get("type") == "text":
        return {"type": "text", "text": ""}
    return block


def _delta(block: JSON) -> JSON | None:
    if block.get("type") == "tool_use":
        return {"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}))}
    if block.get("type") == "text":
        return {"type": "text_delta", "text": block.get("text", "")}
    return None


def stream_body(message: JSON) -> bytes:
    """message_start, then start/delta/stop per content block, message_delta, message_stop."""
    usage: dict[str, Any] = dict(message.get("usage") or {})
    head = message | {"content": [], "stop_reason": None, "stop_sequence": None}
    head["usage"] = usage | {"output_tokens": 1}
    events = [_event("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(message.get("content") or []):
        events.append(
            _event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": _start_block(block),
                },
            )
        )
        delta = _delta(block)
        if delta is not None:
            events.append(
                _event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {
        "stop_reason": message.get("stop_reason"),
        "stop_sequence": message.get("stop_sequence"),
    }
    events.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": stop,
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
        )
    )
    events.append(_event("message_stop", {"type": "message_stop"}))
    return "".join(events).encode()
