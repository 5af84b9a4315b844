"""The one door to a model: `Model.respond(prompt, payload) -> ModelReply`.

Every model call a run makes goes through it: the Verifier's and the Composer's, the Planner's,
each Executor turn and its structural repair, the knowledge answer. `prompt` is the prompt file
the call is asked under (its `role` names the caller); `payload` is the call's whole input as
fixed bytes, so a retry sends it again unchanged and its sha256 is the attempt row's
`input_sha256`. The reply is raw text with its usage; the caller parses it.

What the bytes are depends on the role:

- the single-turn roles (Verifier, Composer) send their contract's canonical JSON; an offline
  model reads it directly, the Claude one frames it as data in a Messages request;
- the Messages roles (Planner, Executor, knowledge answerer) build the whole Messages request
  themselves, and send its canonical bytes (`MessagesRequest.canonical_bytes`); the model over a
  Messages provider (`pipeline.agents.claude.MessagesModel`) reads the request back from
  them. What an attempt digests is then exactly what goes on the wire.

What is not a model call is layered on this one interface rather than beside it:

- retries, attempt rows, the token budget, the journal and cancellation are one wrapper around
  a `Model` (`pipeline.run.attempts.Retrying`), given its policy and whether it sends network
  requests by whoever builds it (`pipeline.factory`), never discovered on the model;
- role behaviour (the Planner's plan, the Executor's multi-turn step and its structural repair,
  the knowledge answer) is agent code that builds a request and calls its wrapped model; the
  protocols of `pipeline.agents.protocols` say what the graph's nodes ask of those agents (an
  offline agent answers them without any model).

Nothing here imports the agents, the run machinery or a provider SDK: both `pipeline.agents`
and `pipeline.run` stand on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pipeline.prompts import Prompt

__all__ = ["Model", "ModelReply"]


@dataclass(frozen=True, slots=True)
class ModelReply:
    """Raw text of one model answer, with its usage."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0


class Model(Protocol):
    """A model that answers one input. Raises `RunFailure` subtypes on failure."""

    @property
    def model(self) -> str:
        """The model's name, as attempt rows record it."""
        ...

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Answer `payload` under `prompt`; the caller parses and validates the text."""
        ...
