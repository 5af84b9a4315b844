"""The LeaseKeeper on a recording store double: hold, refusal, one renewal statement for every
held lease, tokens set on a lost or unrenewable lease; and the settings check."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.errors import ConfigurationError, StoreUnavailableError
from pipeline.run.cancellation import current_token
from pipeline.run.lease import LOST, UNRENEWED, LeaseKeeper, check_lease_settings, owner_id
from pipeline.store import LeaseOutcome, LeaseState


@dataclass
class FakeLeases:
    """Leases in a dict; `lost` names runs a renewal reports lost; `down` makes it raise."""

    refuse: LeaseState | None = None
    lost: set[str] = field(default_factory=set)
    down: bool = False
    acquired: list[tuple[str, int]] = field(default_factory=list)
    renewals: list[list[str]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    def acquire_lease(self, run_id: str, *, version: int, owner: str, ttl_s: float
                      ) -> LeaseOutcome:
        self.acquired.append((run_id, version))
        expires = datetime.now(UTC) + timedelta(seconds=ttl_s)
        if self.refuse is not None:
            return LeaseOutcome(self.refuse, version, "someone-else", expires)
        return LeaseOutcome("acquired", version, owner, expires)

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        if self.down:
            raise StoreUnavailableError("database unavailable: connection refused")
        self.renewals.append(sorted(run_ids))
        return set(run_ids) & self.lost

    def release_lease(self, run_id: str, owner: str) -> bool:
        self.released.append(run_id)
        return True


@pytest.fixture
def leases() -> FakeLeases:
    return FakeLeases()


@pytest.fixture
def keeper(leases: FakeLeases) -> Iterator[LeaseKeeper]:
    built = LeaseKeeper(leases, ttl_s=0.6, renew_s=0.05)
    yield built
    built.close()


def _holding(keeper: LeaseKeeper, run_ids: list[str], release: threading.Event
             ) -> list[threading.Thread]:
    """One thread per run holding its lease until `release` is set."""
    started = threading.Barrier(len(run_ids) + 1)

    def hold(run_id: str) -> None:
        with keeper.hold(run_id, 3):
            started.wait()
            release.wait(10)

    threads = [threading.Thread(target=hold, args=(r,), daemon=True) for r in run_ids]
    for thread in threads:
        thread.start()
    started.wait()
    return threads


def test_hold__binds_the_token_and_gives_the_lease_back(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    assert current_token() is None
    with keeper.hold("run-1", 3) as held:
        assert held.acquired and held.outcome.owner == keeper.owner
        assert current_token() is held.token and not held.token.cancelled
        assert keeper.held() == ["run-1"]
    assert current_token() is None and keeper.held() == []
    assert leases.acquired == [("run-1", 3)] and leases.released == ["run-1"]


def test_hold__a_commit_that_cleared_the_lease_needs_no_release(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    with keeper.hold("run-1", 3) as held:
        held.mark_cleared()
    assert leases.released == []


@pytest.mark.parametrize("state", ["leased", "stale", "ended"])
def test_hold__a_refused_lease_binds_nothing_and_releases_nothing(
    keeper: LeaseKeeper, leases: FakeLeases, state: LeaseState
) -> None:
    leases.refuse = state
    with keeper.hold("run-1", 3) as held:
        assert not held.acquired and held.outcome.state == state
        assert current_token() is None
    assert leases.released == [] and keeper.held() == []


def test_hold__a_second_copy_in_this_process_is_refused_without_a_round_trip(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    release = threading.Event()
    threads = _holding(keeper, ["run-1"], release)
    with keeper.hold("run-1", 3) as second:
        assert not second.acquired and second.outcome.state == "leased"
        assert second.outcome.owner == keeper.owner
    release.set()
    for thread in threads:
        thread.join(5)
    assert leases.acquired == [("run-1", 3)]


def test_renew__every_held_lease_in_one_call_per_tick(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    release = threading.Event()
    threads = _holding(keeper, ["run-a", "run-b", "run-c"], release)
    time.sleep(0.3)
    release.set()
    for thread in threads:
        thread.join(5)
    full = [r for r in leases.renewals if r == ["run-a", "run-b", "run-c"]]
    assert len(full) >= 3  # ticks every 0.05 s, all three held throughout
    assert all(set(r) <= {"run-a", "run-b", "run-c"} for r in leases.renewals)


def test_renew__a_lost_run_has_its_token_set_within_a_second(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    with keeper.hold("run-1", 3) as held, keeper.hold("run-2", 3) as other:
        time.sleep(0.1)
        lost_at = time.monotonic()
        leases.lost.add("run-1")  # cancelled, ended or taken over
        assert held.token.wait(1.0)
        assert time.monotonic() - lost_at < 1.0
        assert held.token.reason == LOST and not other.token.cancelled


def test_renew__unrenewable_for_a_whole_ttl_sets_the_token(
    keeper: LeaseKeeper, leases: FakeLeases
) -> None:
    with keeper.hold("run-1", 3) as held:
        leases.down = True
        assert not held.token.wait(0.3)  # an outage shorter than the TTL changes nothing
        assert held.token.wait(1.0)
        assert held.token.reason == UNRENEWED


def test_renew__nothing_held_no_statement(leases: FakeLeases) -> None:
    keeper = LeaseKeeper(leases, ttl_s=1.0, renew_s=0.05)
    assert keeper.renew() == set() and leases.renewals == []


def test_owner_id__host_pid_and_a_unique_part() -> None:
    first, second = owner_id(), owner_id()
    host, pid, unique = first.split(":")
    assert host and pid.isdigit() and len(unique) == 12 and first != second


@dataclass
class _Settings:
    lease_ttl_s: float = 30.0
    lease_renew_s: float = 0.5
    visibility_timeout: float = 600


@pytest.mark.parametrize(("settings", "fails"), [
    pytest.param(_Settings(), False, id="defaults"),
    pytest.param(_Settings(lease_ttl_s=1.0, visibility_timeout=3), False, id="fast-tests"),
    pytest.param(_Settings(lease_ttl_s=400.0), True, id="ttl-near-visibility-timeout"),
    pytest.param(_Settings(lease_renew_s=20.0), True, id="renewal-slower-than-half-ttl"),
])
def test_check_lease_settings(settings: _Settings, fails: bool) -> None:
    if fails:
        with pytest.raises(ConfigurationError):
            check_lease_settings(settings)
    else:
        check_lease_settings(settings)
