"""The one scripted test double: `Scripted`, a model (`pipeline.model.Model`) and a Messages
provider (`pipeline.providers.messages.MessagesProvider`) that answers from a queue.

Replies come in order. A text, an exception (raised) or a function of the payload (answering
that call and every later one) answer `respond`, the model door: each call is recorded in
`calls` as (prompt name, payload). A `MessagesResponse` or an exception answers `send`, the
transport under a Claude agent: each request is recorded in `requests`, and none is sent (or
popped) once a bound cancel token is set. Wrap it in `Retrying(..., remote=True)` to stand in for
a remote model (its attempts are then journaled).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.providers.messages import MessagesRequest, MessagesResponse
from pipeline.run.cancellation import raise_if_cancelled

Reply = str | Exception | Callable[[bytes], str] | MessagesResponse


@dataclass
class Scripted:
    """Answers from a queue of replies, recording every call and request."""

    model: str = "scripted"
    replies: deque[Reply] = field(default_factory=deque)
    calls: list[tuple[str, bytes]] = field(default_factory=list)
    requests: list[MessagesRequest] = field(default_factory=list)

    def enqueue(self, *replies: Reply) -> Scripted:
        """Add replies in order; returns self for chaining."""
        self.replies.extend(replies)
        return self

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """The next reply as the model's text: raised if it is an exception, called (and kept
        for later calls) if it is a function."""
        self.calls.append((prompt.name, payload))
        reply = self.replies[0] if callable(self.replies[0]) else self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            return ModelReply(text=reply(payload))
        assert isinstance(reply, str), f"a scripted model replies with text, not {reply!r}"
        return ModelReply(text=reply)

    def send(self, request: MessagesRequest) -> MessagesResponse:
        """The next reply as the provider's response; raised if it is an exception."""
        raise_if_cancelled(f"{request.role} ({request.model})")
        self.requests.append(request)
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        assert isinstance(reply, MessagesResponse), f"a scripted provider sends responses, " \
            f"not {reply!r}"
        return reply


def function_model(function: Callable[[bytes], str], model: str = "function") -> Scripted:
    """A scripted model that answers every call with `function(payload)`."""
    return Scripted(model=model).enqueue(function)
