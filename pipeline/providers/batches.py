"""Message Batches behind the provider protocol: concurrent `send` calls become one batch.

`BatchingProvider.send` has the `MessagesProvider` signature, so agents use it unchanged. Each
call waits while one dispatcher thread collects the calls of every thread into a Message Batch,
creates it, polls it and hands each caller its own result, matched by `custom_id`:

    send ─┐                 ┌ create_batch ─ retrieve_batch … ended ─ batch_results ┐
    send ─┼─ pending ─flush─┤                 (every poll_interval_s)               ├─ callers
    send ─┘  (max_batch or  └ error: every caller of the batch gets it              ┘
              flush_after_s since the first)

| outcome                         | the caller gets                                            |
|---------------------------------|------------------------------------------------------------|
| succeeded                       | its `MessagesResponse`: `batch_id` set, `usage.batched`    |
|                                 | (half price, `pricing`), `latency_ms` = the time it waited |
| errored                         | the error its error object stands for, as a direct call's  |
|                                 | status would map (`anthropic`): 429/500/529 unavailable,   |
|                                 | 400 rejected ...                                           |
| expired, canceled, no result    | ProviderUnavailableError (no result: ProviderOutputInvalid)|
| create, poll or results refused | that call's error (a 429 on create: ProviderUnavailable-   |
|                                 | Error with `retry_after`), for every caller of the batch   |
| not ended after `timeout_s`     | ProviderUnavailableError; the batch is cancelled           |
| its CancelToken set             | RunCancelledError at once; a batch nobody waits for is     |
|                                 | cancelled, a request not yet sent never is                 |

So the runtime's retry and fallback rules (`pipeline.run.attempts`) apply as to a direct call: a
retried `send` joins a later batch. With `fallback_to_messages=True` an expired or canceled
request, or one errored with a transient error, is sent once more as a normal Messages call
(`transport.send`, from the caller's thread, so its CancelToken still reaches it). Transient
errors of a poll are retried at the next poll until `timeout_s`.

Custom ids are `{role}__{n:06d}` (`verifier__000012`): unique per provider, and the fake
server (`fake_anthropic.batches`) reads a batch request's role from them, since a request in
a batch has no `x-verity-role` header of its own.

The SDK half — the four batch calls — is on `AnthropicProvider` (`anthropic`, the one module
importing the SDK); anything with those methods and `send` is a `BatchTransport`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from pipeline.errors import (
    ConfigurationError,
    ProviderOutputInvalidError,
    ProviderUnavailableError,
    RunCancelledError,
    VerityError,
)
from pipeline.providers.messages import MessagesRequest, MessagesResponse
from pipeline.run.cancellation import current_token

__all__ = [
    "BATCH_COUNTS",
    "BatchItem",
    "BatchResult",
    "BatchStatus",
    "BatchTransport",
    "BatchingProvider",
    "custom_id_for",
]

BATCH_COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")
"""The request counts of a batch, by state."""
MAX_BATCH = 100_000
"""The Message Batches API's limit of requests in one batch."""
ResultKind = Literal["succeeded", "errored", "canceled", "expired"]
_NOT_ID = re.compile(r"[^a-zA-Z0-9_-]+")


@dataclass(frozen=True)
class BatchItem:
    """One request of a batch and the id its result comes back under."""

    custom_id: str
    request: MessagesRequest


@dataclass(frozen=True)
class BatchStatus:
    """A Message Batch as the API reports it."""

    id: str
    processing_status: str
    """`in_progress`, `canceling` or `ended`."""
    request_counts: Mapping[str, int] = field(default_factory=dict)
    """Requests per state (`BATCH_COUNTS`); only `processing` is non-zero until it ends."""
    results_url: str | None = None
    """Where the results are, once it ended."""

    @property
    def ended(self) -> bool:
        """Whether processing ended (its results can be read)."""
        return self.processing_status == "ended"


@dataclass(frozen=True)
class BatchResult:
    """One line of a batch's results."""

    custom_id: str
    kind: ResultKind
    response: MessagesResponse | None = None
    """The answer, when `kind` is succeeded."""
    error: VerityError | None = None
    """What a direct call would have raised, when `kind` is errored."""


class BatchTransport(Protocol):
    """What the batching provider needs of a provider (`AnthropicProvider` has it all)."""

    def send(self, request: MessagesRequest) -> MessagesResponse:
        """One normal Messages call (for `fallback_to_messages`)."""
        ...

    def create_batch(self, items: Sequence[BatchItem], *, timeout_s: float | None = None
                     ) -> BatchStatus:
        """Create a batch of `items`."""
        ...

    def retrieve_batch(self, batch_id: str, *, timeout_s: float | None = None) -> BatchStatus:
        """The batch's status now."""
        ...

    def batch_results(self, batch_id: str, *, timeout_s: float | None = None
                      ) -> list[BatchResult]:
        """Every result of an ended batch."""
        ...

    def cancel_batch(self, batch_id: str, *, timeout_s: float | None = None) -> BatchStatus:
        """Ask for the batch to be cancelled."""
        ...


def custom_id_for(role: str, number: int) -> str:
    """`{role}__{number:06d}`, the role cut to the API's custom_id alphabet (at most 64)."""
    name = re.sub(r"_+", "_", _NOT_ID.sub("-", role)).strip("_") or "request"
    return f"{name[:48]}__{number:06d}"


class _Waiter:
    """One `send` call waiting for its result. Its fields change under the provider's lock."""

    def __init__(self, request: MessagesRequest, custom_id: str) -> None:
        self.request = request
        self.custom_id = custom_id
        self.enqueued = time.monotonic()
        self.woken = threading.Event()
        self.state: Literal["waiting", "done", "abandoned"] = "waiting"
        self.response: MessagesResponse | None = None
        self.error: BaseException | None = None
        self.send_direct = False
        self.flight: _Flight | None = None

    @property
    def who(self) -> str:
        return f"{self.request.role} ({self.request.model})"


@dataclass
class _Flight:
    """A created batch being polled."""

    id: str
    waiters: dict[str, _Waiter]
    deadline: float
    next_poll: float
    cancel_wanted: bool = False


class BatchingProvider:
    """A `MessagesProvider` that answers through the Message Batches API (module doc).

    Thread-safe; one daemon dispatcher thread (`verity-batch-dispatch`), started by the first
    `send` and ended by `close()`, which also fails whatever still waits. The transport is the
    caller's: `close()` does not close it."""

    def __init__(
        self,
        transport: BatchTransport,
        *,
        max_batch: int = 100,
        flush_after_s: float = 0.05,
        poll_interval_s: float = 1.0,
        timeout_s: float = 3600.0,
        call_timeout_s: float | None = 60.0,
        fallback_to_messages: bool = False,
    ) -> None:
        """`max_batch` requests at most per batch; a batch is sent when that many wait or
        `flush_after_s` after the first; polled every `poll_interval_s`; given up (and
        cancelled) `timeout_s` after its creation. `call_timeout_s` bounds each batch API
        call (None: the transport's own timeout)."""
        if not 1 <= max_batch <= MAX_BATCH:
            raise ConfigurationError(f"max_batch is 1 to {MAX_BATCH}, not {max_batch}")
        if flush_after_s < 0 or poll_interval_s <= 0 or timeout_s <= 0:
            raise ConfigurationError(
                "flush_after_s is not negative; poll_interval_s and timeout_s are positive")
        self._transport = transport
        self._max_batch = max_batch
        self._flush_after_s = flush_after_s
        self._poll_interval_s = poll_interval_s
        self._timeout_s = timeout_s
        self._call_timeout_s = call_timeout_s
        self._fallback = fallback_to_messages
        self._lock = threading.Condition()
        self._pending: list[_Waiter] = []
        self._flights: list[_Flight] = []
        self._flush_now = False
        self._closing = False
        self._numbers = 0
        self._batch_ids: list[str] = []
        self._thread: threading.Thread | None = None

    @property
    def batch_ids(self) -> list[str]:
        """The ids of the batches created so far, in order."""
        with self._lock:
            return list(self._batch_ids)

    def send(self, request: MessagesRequest) -> MessagesResponse:
        """`request`'s answer, through the next batch (see the module doc for the errors)."""
        token = current_token()
        who = f"{request.role} ({request.model})"
        if token is not None:
            token.raise_if_cancelled(who)
        waiter = self._enqueue(request)
        forget = token.on_cancel(waiter.woken.set) if token is not None else None
        try:
            waiter.woken.wait()
        finally:
            if forget is not None:
                forget()
        with self._lock:
            abandoned = waiter.state == "waiting"  # woken by the token, not by a result
            if abandoned:
                self._abandon(waiter)
        if abandoned:
            reason = token.reason if token is not None else None
            raise RunCancelledError(f"{who}: batched request abandoned, {reason}")
        if waiter.error is not None:
            if waiter.send_direct:
                return self._transport.send(request)
            raise waiter.error
        assert waiter.response is not None
        return waiter.response

    def flush(self) -> None:
        """Send every waiting request now, without waiting for `flush_after_s`."""
        with self._lock:
            self._flush_now = bool(self._pending)
            self._lock.notify_all()

    def close(self) -> None:
        """End the dispatcher: cancel the batches in flight (best effort), fail every caller
        still waiting with ProviderUnavailableError, and join the thread."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    # -- callers' side (under the lock) ----------------------------------------------------

    def _enqueue(self, request: MessagesRequest) -> _Waiter:
        with self._lock:
            if self._closing:
                raise ProviderUnavailableError(
                    f"{request.role} ({request.model}): the batching provider is closed")
            self._numbers += 1
            waiter = _Waiter(request, custom_id_for(request.role, self._numbers))
            self._pending.append(waiter)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="verity-batch-dispatch", daemon=True)
                self._thread.start()
            self._lock.notify_all()
            return waiter

    def _abandon(self, waiter: _Waiter) -> None:
        waiter.state = "abandoned"
        if waiter in self._pending:
            self._pending.remove(waiter)
        flight = waiter.flight
        if flight is not None and all(w.state == "abandoned" for w in flight.waiters.values()):
            flight.cancel_wanted = True
            self._lock.notify_all()

    # -- the dispatcher ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while (work := self._next_work()) is not None:
                kind, subject = work
                if kind == "create":
                    assert isinstance(subject, list)
                    self._create(subject)
                else:
                    assert isinstance(subject, _Flight)
                    if kind == "cancel":
                        self._cancel(subject)
                    else:
                        self._poll(subject)
        finally:
            self._shut_down()

    def _next_work(self) -> tuple[str, list[_Waiter] | _Flight] | None:
        """The next thing to do, waiting (without spinning) until there is one; None when
        closing."""
        with self._lock:
            while not self._closing:
                now = time.monotonic()
                wakes: list[float] = []
                if self._pending:
                    due = self._pending[0].enqueued + self._flush_after_s
                    if self._flush_now or len(self._pending) >= self._max_batch or now >= due:
                        taken = self._pending[: self._max_batch]
                        del self._pending[: self._max_batch]
                        self._flush_now = self._flush_now and bool(self._pending)
                        return "create", taken
                    wakes.append(due)
                for flight in self._flights:
                    if flight.cancel_wanted:
                        self._flights.remove(flight)
                        return "cancel", flight
                if self._flights:
                    flight = min(self._flights, key=lambda f: f.next_poll)
                    if flight.next_poll <= now:
                        return "poll", flight
                    wakes.append(flight.next_poll)
                self._lock.wait(max(0.0, min(wakes) - now) if wakes else None)
            return None

    def _create(self, waiters: list[_Waiter]) -> None:
        items = [BatchItem(w.custom_id, w.request) for w in waiters]
        try:
            status = self._transport.create_batch(items, timeout_s=self._call_timeout_s)
        except Exception as exc:  # every caller of the batch gets the create's error
            self._settle(waiters, error=exc)
            return
        now = time.monotonic()
        flight = _Flight(status.id, {w.custom_id: w for w in waiters},
                         deadline=now + self._timeout_s,
                         next_poll=now + min(self._poll_interval_s, self._timeout_s))
        with self._lock:
            self._batch_ids.append(status.id)
            for waiter in waiters:
                waiter.flight = flight
            flight.cancel_wanted = all(w.state == "abandoned" for w in waiters)
            self._flights.append(flight)

    def _poll(self, flight: _Flight) -> None:
        try:
            if self._transport.retrieve_batch(flight.id, timeout_s=self._call_timeout_s).ended:
                results = self._transport.batch_results(flight.id, timeout_s=self._call_timeout_s)
                self._deliver(flight, results)
                return
        except ProviderUnavailableError:
            pass  # a transient poll error: poll again, until the deadline
        except Exception as exc:
            self._land(flight, error=exc)
            return
        now = time.monotonic()
        if now >= flight.deadline:
            self._cancel(flight)
            self._land(flight, error=ProviderUnavailableError(
                f"Message Batch {flight.id} did not end within {self._timeout_s:g} s"))
            return
        with self._lock:
            flight.next_poll = min(now + self._poll_interval_s, flight.deadline)

    def _cancel(self, flight: _Flight) -> None:
        try:
            self._transport.cancel_batch(flight.id, timeout_s=self._call_timeout_s)
        except VerityError:
            pass  # best effort: an ended batch cannot be cancelled, and nobody waits for it

    def _deliver(self, flight: _Flight, results: Sequence[BatchResult]) -> None:
        by_id = {result.custom_id: result for result in results}
        for custom_id, waiter in flight.waiters.items():
            result = by_id.get(custom_id)
            if result is None:
                self._settle([waiter], error=ProviderOutputInvalidError(
                    f"{waiter.who}: no result for {custom_id} in Message Batch {flight.id}"))
            elif result.kind == "succeeded" and result.response is not None:
                waited_ms = round((time.monotonic() - waiter.enqueued) * 1000, 3)
                self._settle([waiter], response=replace(result.response, latency_ms=waited_ms))
            else:
                error = result.error or ProviderUnavailableError(
                    f"{waiter.who}: {custom_id} {result.kind} in Message Batch {flight.id}")
                direct = self._fallback and (result.kind in ("expired", "canceled")
                                             or isinstance(error, ProviderUnavailableError))
                self._settle([waiter], error=error, send_direct=direct)
        self._land(flight)

    def _land(self, flight: _Flight, *, error: BaseException | None = None) -> None:
        """The flight is over: forget it; `error` for whoever of it still waits."""
        with self._lock:
            if flight in self._flights:
                self._flights.remove(flight)
        if error is not None:
            self._settle(list(flight.waiters.values()), error=error)

    def _settle(self, waiters: Sequence[_Waiter], *, response: MessagesResponse | None = None,
                error: BaseException | None = None, send_direct: bool = False) -> None:
        """Hand an outcome to each waiter still waiting (the abandoned ones are past caring)."""
        with self._lock:
            settled = [w for w in waiters if w.state == "waiting"]
            for waiter in settled:
                waiter.state, waiter.response, waiter.error = "done", response, error
                waiter.send_direct = send_direct
        for waiter in settled:
            waiter.woken.set()

    def _shut_down(self) -> None:
        with self._lock:
            self._closing = True
            pending, self._pending = self._pending, []
            flights, self._flights = self._flights, []
        for flight in flights:
            self._cancel(flight)
        waiting = pending + [w for f in flights for w in f.waiters.values()]
        self._settle(waiting, error=ProviderUnavailableError(
            "the batching provider was closed before the batch ended"))
