"""Request builders shared by the fake server's tests."""

from __future__ import annotations

from typing import Any

import anthropic

MODEL = "claude-fake-1"
USER = [{"role": "user", "content": "Why is checkout-service returning 500s?"}]
VERIFIER_TOOL: dict[str, Any] = {
    "name": "submit_verifier_output",
    "description": "Return the verdict.",
    "input_schema": {
        "type": "object",
        "properties": {"verdict": {"type": "string"}, "score": {"type": "number"}},
        "required": ["verdict", "score"],
    },
}


def ask(client: anthropic.Anthropic, role: str | None = None, **kwargs: Any) -> Any:
    """One messages.create call, tagged with `role` when given."""
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": USER} | kwargs
    if role is not None:
        params["extra_headers"] = {"x-verity-role": role} | params.get("extra_headers", {})
    return client.messages.create(**params)


def post_raw(client: anthropic.Anthropic, body: dict[str, Any]) -> Any:
    """POST a body the typed `create` would refuse to send (missing required fields)."""
    return client.post("/v1/messages", body=body, cast_to=object)
