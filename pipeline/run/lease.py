"""One execution at a time per node: the process's `LeaseKeeper`.

A node copy runs only while it holds its run's node lease (`RunStore.acquire_lease`, a
conditional UPDATE at the run's version). The keeper is one daemon thread per process: every
`lease_renew_s` it renews every lease the process holds in one `renew_leases` statement, and
sets the `CancelToken` of each run the store names as lost — cancelled, ended, or leased by
someone else — so that run's model call stops within about a second (`pipeline.run.cancellation`).
A lease the keeper cannot renew for a whole TTL (database unreachable) has expired for everyone
else, so its token is set too.

    with keeper.hold(run_id, version) as held:
        if not held.acquired:        # held.outcome.state: "leased", "stale" or "ended"
            ...
        ...                          # held.token is bound: model calls see it

The owner id is `<hostname>:<pid>:<uuid>`; leases of one process share it, and a second copy of
a node in the same process is refused without a database round trip. The TTL must stay well
below the broker's visibility timeout, so a redelivered message finds a dead copy's lease
expired (`check_lease_settings`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol
from uuid import uuid4

from pipeline.errors import ConfigurationError, StoreError
from pipeline.run.cancellation import CancelToken, bind
from pipeline.store import LeaseOutcome

__all__ = ["Held", "LeaseKeeper", "Leases", "check_lease_settings", "owner_id"]

LOST = "its run was cancelled or ended, or its node lease was taken over"
UNRENEWED = "its node lease could not be renewed for a whole TTL (database unreachable)"


class Leases(Protocol):
    """The store's lease operations (`RunStore` has them)."""

    def acquire_lease(
        self, run_id: str, *, version: int, owner: str, ttl_s: float
    ) -> LeaseOutcome:
        """Take the run's lease at `version`, or say why not."""
        ...

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        """Extend the leases; the ids that are lost."""
        ...

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease back."""
        ...


class _LeaseSettings(Protocol):
    @property
    def lease_ttl_s(self) -> float: ...

    @property
    def lease_renew_s(self) -> float: ...

    @property
    def visibility_timeout(self) -> float: ...


def owner_id() -> str:
    """`<hostname>:<pid>:<uuid>`: this process, told apart from an earlier one with its pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:12]}"


def check_lease_settings(settings: _LeaseSettings) -> None:
    """ConfigurationError unless the TTL is at most half the visibility timeout (a dead copy's
    lease must have expired when its message is redelivered) and renewals come at least twice
    per TTL."""
    ttl, renew, visibility = (settings.lease_ttl_s, settings.lease_renew_s,
                              settings.visibility_timeout)
    if ttl * 2 > visibility:
        raise ConfigurationError(
            f"VERITY_LEASE_TTL_S={ttl:g} must be at most half of "
            f"VERITY_VISIBILITY_TIMEOUT={visibility:g}: a redelivered node would find the "
            "dead copy's lease still live")
    if renew * 2 > ttl:
        raise ConfigurationError(
            f"VERITY_LEASE_RENEW_S={renew:g} must be at most half of VERITY_LEASE_TTL_S="
            f"{ttl:g}: a live lease would expire between two renewals")


@dataclass
class Held:
    """One `hold`: whether the lease was acquired, why not, and the run's cancel token."""

    run_id: str
    outcome: LeaseOutcome
    token: CancelToken = field(default_factory=CancelToken)
    renewed_at: float = field(default_factory=time.monotonic)
    cleared: bool = False

    @property
    def acquired(self) -> bool:
        """Whether the lease is ours for the block."""
        return self.outcome.acquired

    def mark_cleared(self) -> None:
        """The node's commit cleared the lease (`commit_node` does): no more renewals, and
        nothing to give back on exit."""
        self.cleared = True


class LeaseKeeper:
    """Holds this process's node leases and renews them from one background thread."""

    def __init__(self, store: Leases, *, ttl_s: float = 30.0, renew_s: float = 0.5,
                 owner: str | None = None) -> None:
        """The thread starts with the first `hold`."""
        self.store = store
        self.ttl_s = ttl_s
        self.renew_s = renew_s
        self.owner = owner or owner_id()
        self._held: dict[str, Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_settings(cls, store: Leases, settings: _LeaseSettings) -> LeaseKeeper:
        """A keeper with the configured TTL and renewal period (checked first)."""
        check_lease_settings(settings)
        return cls(store, ttl_s=settings.lease_ttl_s, renew_s=settings.lease_renew_s)

    @contextmanager
    def hold(self, run_id: str, version: int) -> Iterator[Held]:
        """Acquire the run's node lease at `version` for the block, with its token bound to
        the context while it is held; give it back on exit. A refused lease yields a `Held`
        that is not `acquired` (nothing bound, nothing given back)."""
        held = self._acquire(run_id, version)
        if not held.acquired:
            yield held
            return
        try:
            with bind(held.token):
                yield held
        finally:
            self._release(held)

    def held(self) -> list[str]:
        """The runs whose leases this process holds now."""
        with self._lock:
            return list(self._held)

    def renew(self) -> set[str]:
        """One renewal of every held lease (the thread's tick); the runs whose tokens it set."""
        with self._lock:
            holds = {run_id: held for run_id, held in self._held.items() if not held.cleared}
        if not holds:
            return set()
        try:
            lost = self.store.renew_leases(self.owner, list(holds), self.ttl_s)
        except StoreError:  # unreachable: a lease not renewed for a whole TTL is gone
            deadline = time.monotonic() - self.ttl_s
            return {run_id for run_id, held in holds.items()
                    if held.renewed_at < deadline and held.token.cancel(UNRENEWED)}
        now = time.monotonic()
        for run_id, held in holds.items():
            if run_id not in lost:
                held.renewed_at = now
        return {run_id for run_id in lost if holds[run_id].token.cancel(LOST)}

    def close(self) -> None:
        """Stop the renewal thread (held leases then expire by themselves)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=max(1.0, self.renew_s * 4))

    def _acquire(self, run_id: str, version: int) -> Held:
        with self._lock:
            if run_id in self._held:  # another thread of this process runs it: no round trip
                mine = self._held[run_id].outcome
                return Held(run_id, LeaseOutcome("leased", version, self.owner, mine.expires_at))
        outcome = self.store.acquire_lease(run_id, version=version, owner=self.owner,
                                           ttl_s=self.ttl_s)
        held = Held(run_id, outcome)
        if not outcome.acquired:
            return held
        with self._lock:
            if run_id in self._held:  # two threads of this process raced past the check
                return Held(run_id, LeaseOutcome("leased", version, self.owner,
                                                 outcome.expires_at))
            self._held[run_id] = held
            self._start()
        return held

    def _release(self, held: Held) -> None:
        with self._lock:
            if self._held.get(held.run_id) is held:
                del self._held[held.run_id]
        if held.cleared:
            return
        try:
            self.store.release_lease(held.run_id, self.owner)
        except StoreError:  # unreachable: the lease expires by itself within its TTL
            pass

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="verity-lease-keeper",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.renew_s):
            try:
                self.renew()
            except Exception:  # the keeper must outlive any one tick
                continue
