"""The one interface to single-turn models (Verifier, Composer), and test doubles beside it.

A model that sends network requests says so with `remote = True` (the Claude agents): its
attempts are journaled as they happen when the `AttemptLog` has a journal
(`pipeline.run.attempts`). Offline models and the doubles here are local unless told otherwise.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pipeline.prompts import Prompt


@dataclass(frozen=True, slots=True)
class ModelReply:
    """Raw text of one model answer, with its usage."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class SingleTurnModel(Protocol):
    """A model that answers one serialized input. Raises `RunFailure` subtypes on failure."""

    model: str

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Answer `payload` under `prompt`; the caller parses and validates the text."""
        ...


def sends_requests(model: object) -> bool:
    """Whether `model` declares that it sends network requests (`remote = True`)."""
    return getattr(model, "remote", False) is True


@dataclass
class ScriptedModel:
    """A test double: replies from a queue (text or an exception), recording every call."""

    model: str = "scripted"
    replies: deque[str | Exception] = field(default_factory=deque)
    calls: list[tuple[str, bytes]] = field(default_factory=list)
    remote: bool = False
    """Stand in for a remote model (its attempts are then journaled)."""

    def enqueue(self, *replies: str | Exception) -> ScriptedModel:
        """Add replies in order; returns self for chaining."""
        self.replies.extend(replies)
        return self

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Pop the next reply; raise it if it is an exception."""
        self.calls.append((prompt.name, payload))
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return ModelReply(text=reply)


@dataclass
class FunctionModel:
    """A test double that answers with a function of the payload."""

    function: Callable[[bytes], str]
    model: str = "function"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Call the function."""
        return ModelReply(text=self.function(payload))
