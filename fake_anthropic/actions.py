"""What the fake does with one request: respond, hang or drop the connection, after a delay."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Respond:
    """Send this status, body and headers."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Say nothing for `seconds` (cut short when the server stops), then close the socket."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the socket without a response."""


Action = Respond | Hang | Drop


@dataclass(frozen=True)
class Decision:
    """Wait `delay` seconds, then do `action`."""

    delay: float
    action: Action
