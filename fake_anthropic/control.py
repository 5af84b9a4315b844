"""What the in-process server (`server.FakeAnthropic`) and the control client of a spawned one
(`process.FakeControl`) share: the reply and fault shorthands of their control API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fake_anthropic.faults import parse_fault
from fake_anthropic.tokens import JSON


def as_replies(replies: object) -> list[object]:
    """One reply (a string or an object) or a list of them, as a list."""
    if isinstance(replies, str | Mapping):
        return [replies]
    if isinstance(replies, Sequence):
        return list(replies)
    raise TypeError(f"replies are a reply or a list of replies, not {type(replies).__name__}")


def fault_specs(kind: str | int, times: int, options: Mapping[str, Any]) -> list[JSON]:
    """`times` copies of one fault specification, checked."""
    spec: JSON = {"fault": kind} | {k: v for k, v in options.items() if v is not None}
    parse_fault(spec)
    return [dict(spec) for _ in range(times)]


class FaultQueueing:
    """`fault()`, the one-fault shorthand of `faults()`, shared by the in-process server and
    the control client of a spawned one."""

    def faults(self, role: str, specs: Sequence[object]) -> int:
        """Queue fault specifications for `role`; the queue's new length."""
        raise NotImplementedError

    def fault(
        self,
        role: str,
        kind: str | int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        seconds: float | None = None,
        message: str | None = None,
        input: JSON | None = None,  # noqa: A002 - the option's wire name
    ) -> int:
        """Queue `times` copies of one fault for `role`; the queue's new length."""
        options = {"retry_after": retry_after, "seconds": seconds, "message": message}
        return self.faults(role, fault_specs(kind, times, options | {"input": input}))
