"""Builders shared by the provider and Claude agent tests: replies, sleep recorders, policies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pipeline.providers.messages import MessagesResponse, Usage
from pipeline.run.attempts import AttemptLog, RetryPolicy

MODEL = "claude-sonnet-5-5"
FORCING_MODEL = "claude-haiku-4-5"
"""A model that accepts a forced tool choice (its thinking is off by default)."""
USAGE = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=3000, cache_write_tokens=500)
USAGE_COST = (1000 * 2.0 + 200 * 10.0 + 3000 * 0.1 + 500 * 2.5) / 1_000_000
"""What USAGE costs on claude-sonnet-5-5."""


def tool_reply(
    name: str,
    arguments: Any,
    *,
    block_id: str = "toolu_01AAAAAAAAAAAAAAAAAAAAAA",
    usage: Usage = USAGE,
    stop_reason: str = "tool_use",
    thinking: bool = True,
) -> MessagesResponse:
    """A reply with (a thinking block and) one tool_use; `arguments` may be a JSON string."""
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    content: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig"}] if thinking else []
    content.append({"type": "tool_use", "id": block_id, "name": name, "input": arguments})
    return MessagesResponse(content=content, stop_reason=stop_reason, usage=usage, model=MODEL)


def text_reply(text: str, *, stop_reason: str = "end_turn", usage: Usage = USAGE
               ) -> MessagesResponse:
    """A reply with one text block."""
    return MessagesResponse(content=[{"type": "text", "text": text}], stop_reason=stop_reason,
                            usage=usage, model=MODEL)


@dataclass
class Sleeps:
    """An injected sleep that records what it was asked to wait."""

    waits: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def policy(sleeps: Sleeps, **kw: Any) -> RetryPolicy:
    """The production policy's defaults, full jitter fixed (backoff 1, 2, 4, 8 s), no waiting."""
    return RetryPolicy(sleep=sleeps, jitter=lambda: 1.0, **kw)


def log(sleeps: Sleeps | None = None, **kw: Any) -> AttemptLog:
    """An AttemptLog with the production policy and a recording sleep."""
    return AttemptLog("run-claude", policy=policy(sleeps or Sleeps()), **kw)
