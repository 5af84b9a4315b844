"""The scripted model: the one test double of the model door (`pipeline.model.Model`).

Replies come from a queue, in order: text, an exception (raised), or a function of the payload
(answering that call, and staying at the head of the queue to answer every later one). Every call
is recorded as (prompt name, payload). Wrap it in `Retrying(..., remote=True)` to stand in for a
remote model (its attempts are then journaled).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.model import ModelReply
from pipeline.prompts import Prompt

Reply = str | Exception | Callable[[bytes], str]


@dataclass
class ScriptedModel:
    """A `Model` answering from a queue of replies, recording every call."""

    model: str = "scripted"
    replies: deque[Reply] = field(default_factory=deque)
    calls: list[tuple[str, bytes]] = field(default_factory=list)

    def enqueue(self, *replies: Reply) -> ScriptedModel:
        """Add replies in order; returns self for chaining."""
        self.replies.extend(replies)
        return self

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """The next reply: raised if it is an exception, called (and kept) if a function."""
        self.calls.append((prompt.name, payload))
        reply = self.replies[0] if callable(self.replies[0]) else self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return ModelReply(text=reply(payload) if callable(reply) else reply)


def function_model(function: Callable[[bytes], str], model: str = "function") -> ScriptedModel:
    """A scripted model that answers every call with `function(payload)`."""
    return ScriptedModel(model=model).enqueue(function)
