"""Cancel tokens, and the one bound to the calling thread's work.

A node that holds its run's lease gets a `CancelToken` (`pipeline.run.lease.LeaseKeeper.hold`),
which the keeper's thread sets when the run is cancelled, ends, or its lease is lost. `bind`
makes it the current token of the calling context, so a model call deep inside an agent sees it
(`current_token()`) without any plumbing: the Anthropic provider then runs the request so that
the calling thread returns as soon as the token is set, raising `RunCancelledError`.

The token lives in a `contextvars.ContextVar`, so it is per thread (each Celery worker thread
has its own context) and never leaks into another run's call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from pipeline.errors import RunCancelledError

__all__ = ["CancelToken", "bind", "current_token", "raise_if_cancelled"]


class CancelToken:
    """A one-way flag with a reason: once cancelled it stays cancelled.

    `on_cancel` callbacks run once, in the cancelling thread, right after the flag is set (or
    at once if it already is): keep them short (set an event, close a socket).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether the token was set."""
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """Why it was set (the first reason given); None while it is not."""
        return self._reason

    def cancel(self, reason: str) -> bool:
        """Set the token; False if it already was (the first reason is kept)."""
        with self._lock:
            if self._event.is_set():
                return False
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the token is set or `timeout` seconds pass; whether it is set."""
        return self._event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` when the token is set (now, if it is); returns the unsubscriber."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def raise_if_cancelled(self, what: str = "the call") -> None:
        """RunCancelledError if the token is set."""
        if self._event.is_set():
            raise RunCancelledError(f"{what} was cancelled: {self._reason}")

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


_CURRENT: ContextVar[CancelToken | None] = ContextVar("verity_cancel_token", default=None)


def current_token() -> CancelToken | None:
    """The token bound to the calling context, if any."""
    return _CURRENT.get()


@contextmanager
def bind(token: CancelToken | None) -> Iterator[CancelToken | None]:
    """Make `token` the current one inside the block (None unbinds); restores the previous
    one on exit."""
    reset = _CURRENT.set(token)
    try:
        yield token
    finally:
        _CURRENT.reset(reset)


def raise_if_cancelled(what: str = "the call") -> None:
    """RunCancelledError if the current token is set; nothing without a token."""
    token = _CURRENT.get()
    if token is not None:
        token.raise_if_cancelled(what)
