"""Provider-neutral Messages requests and responses, and the provider protocol.

Agents build a `MessagesRequest` (system text, messages, tools as plain dicts in the Messages
API's shape) and get a `MessagesResponse` back (content blocks as plain dicts). Nothing here
imports a provider SDK: `pipeline/providers/anthropic.py` is the one module that does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.serialization import sha256_hex

JSON = dict[str, Any]
EPHEMERAL: JSON = {"type": "ephemeral"}
"""The prompt-cache marker Verity puts on the static prefix."""


@dataclass(frozen=True)
class MessagesRequest:
    """One Messages API call, before caching marks and transport.

    `role` names the agent (planner, executor, verifier, composer, knowledge): it goes out as
    the `x-verity-role` header and is never part of the body.
    """

    role: str
    model: str
    system: str
    messages: Sequence[JSON]
    max_tokens: int
    tools: Sequence[JSON] = ()
    tool_choice: JSON | None = None

    def body(self) -> JSON:
        """The request body. The static prefix — the tool definitions, then the system prompt
        — is marked for prompt caching: `cache_control` on the last tool and on the system
        block. Everything after it (the messages) varies per call."""
        body: JSON = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": self.system, "cache_control": EPHEMERAL}],
            "messages": [dict(m) for m in self.messages],
        }
        if self.tools:
            tools = [dict(t) for t in self.tools]
            tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
            body["tools"] = tools
        if self.tool_choice is not None:
            body["tool_choice"] = dict(self.tool_choice)
        return body

    def canonical_bytes(self) -> bytes:
        """The body as byte-stable JSON (sorted keys, compact, UTF-8)."""
        return json.dumps(self.body(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")

    def sha256(self) -> str:
        """sha256 of `canonical_bytes`: the input digest of the attempt rows."""
        return sha256_hex(self.canonical_bytes())

    @classmethod
    def from_canonical(cls, role: str, data: bytes) -> MessagesRequest:
        """The request whose `canonical_bytes` are `data` (the caching marks `body` adds are
        taken off again): what a `MessagesModel` is given to send."""
        body = json.loads(data)
        tools = [dict(t) for t in body.get("tools", ())]
        if tools:
            tools[-1].pop("cache_control", None)
        return cls(role=role, model=body["model"], system=body["system"][0]["text"],
                   messages=body["messages"], max_tokens=body["max_tokens"], tools=tools,
                   tool_choice=body.get("tool_choice"))


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call, cache reads and writes apart from plain input."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    batched: bool = False
    """The call went through a Message Batch: every token is priced at the batch rate."""

    @property
    def total(self) -> int:
        """Every token the call processed."""
        return (self.input_tokens + self.output_tokens + self.cache_read_tokens
                + self.cache_write_tokens)


@dataclass(frozen=True)
class MessagesResponse:
    """One Messages API answer: content blocks as plain dicts, stop reason, usage.

    A batched answer (`pipeline.providers.batches`) has `batch_id` set, `usage.batched` true,
    no `request_id`, and as `latency_ms` the time its caller waited (collection and batch)."""

    content: list[JSON]
    stop_reason: str | None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    request_id: str | None = None
    latency_ms: float = 0.0
    batch_id: str | None = None
    """The Message Batch that answered; None for a direct Messages call."""

    def tool_uses(self, name: str | None = None) -> list[JSON]:
        """The `tool_use` blocks, in order; only those of tool `name` when given."""
        return [b for b in self.content if b.get("type") == "tool_use"
                and (name is None or b.get("name") == name)]

    def text(self) -> str:
        """The text blocks joined (thinking blocks are not text)."""
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


class MessagesProvider(Protocol):
    """Sends one Messages request. Raises Verity errors only: `ProviderUnavailableError`
    (transient), `ProviderRejectedError`, `ProviderOutputInvalidError`, `ConfigurationError`."""

    def send(self, request: MessagesRequest) -> MessagesResponse:
        """The provider's answer to `request`."""
        ...


def tool_use_response(
    name: str,
    arguments: JSON,
    *,
    block_id: str = "toolu_01scripted",
    usage: Usage | None = None,
    stop_reason: str = "tool_use",
) -> MessagesResponse:
    """A response holding one `tool_use` block (for tests and scripted runs)."""
    block = {"type": "tool_use", "id": block_id, "name": name, "input": arguments}
    return MessagesResponse(content=[block], stop_reason=stop_reason, usage=usage or Usage())
