"""The node tasks wait out a database that drops or refuses connections: StoreUnavailableError
sends the message again, with capped and jittered backoff, while it is within the time budget of
the message's first try; any other error is not retried."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.errors import StoreUnavailableError
from pipeline.run.runtime import NodeOutcome
from tasks import nodes as nodes_module
from tasks import services
from tasks.nodes import NODE_TASKS, coordinate, tool


class FlakyRuntime:
    """Fails the first `failures` calls as a lost database would, then succeeds."""

    def __init__(self, failures: int, error: Exception | None = None,
                 clock: Any = None) -> None:
        self.failures = failures
        self.error = error or StoreUnavailableError("database unavailable: server closed")
        self.calls = 0
        self.clock = clock

    def _maybe_fail(self) -> None:
        self.calls += 1
        if self.clock is not None:
            self.clock.now += self.clock.step
        if self.calls <= self.failures:
            raise self.error

    def run_node(self, run_id: str, node: str, version: int) -> NodeOutcome:
        self._maybe_fail()
        return NodeOutcome("stale", version)

    def coordinate(self, run_id: str, version: int, node: str | None) -> NodeOutcome:
        self._maybe_fail()
        return NodeOutcome("stale", version)

    def run_tool_call(self, run_id: str, tool_call_id: str) -> Any:
        self._maybe_fail()
        return None


@pytest.fixture
def flaky() -> Iterator[type[FlakyRuntime]]:
    yield FlakyRuntime
    services.set_runtime(None)


@pytest.mark.parametrize("task", [NODE_TASKS["verify"], coordinate, tool],
                         ids=["node", "coordinate", "tool"])
def test_a_lost_database_is_retried_until_it_answers(task: Any, flaky: Any) -> None:
    runtime = flaky(failures=2)
    services.set_runtime(runtime)
    args = ("run-1", "toolu_1") if task is tool else ("run-1", 3)
    result = task.apply(args=args, throw=False)  # eager: each retry runs at once
    assert runtime.calls == 3 and result.successful()


class Clock:
    """A wall clock that a failing call moves on (each call to the database takes `step` s)."""

    def __init__(self, step: float) -> None:
        self.now = 1_000_000.0
        self.step = step

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    ticking = Clock(step=50.0)
    monkeypatch.setattr(nodes_module, "_clock", ticking)
    monkeypatch.setattr(nodes_module, "retry_budget_s", lambda: 120.0)
    return ticking


def test_retries_stop_once_the_budget_since_the_first_try_is_spent(
    flaky: Any, clock: Clock
) -> None:
    runtime = flaky(failures=100, clock=clock)
    services.set_runtime(runtime)
    result = NODE_TASKS["plan"].apply(args=("run-1", 0), throw=False)
    assert result.failed() and isinstance(result.result, StoreUnavailableError)
    # tries at 0, 50 and 100 s are retried; the one ending 150 s after the first gives up.
    # Without the first-try time carried by each retry, none would ever be past the budget.
    assert runtime.calls == 3


def test_a_retry_carries_the_first_try_time_in_a_header(
    flaky: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = flaky(failures=2, clock=clock)
    services.set_runtime(runtime)
    first = clock.now
    seen: list[Any] = []
    original = NODE_TASKS["verify"].retry

    def retry(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["headers"][nodes_module.FIRST_TRY_HEADER])
        assert 0 < kwargs["countdown"] <= nodes_module.RETRY_BACKOFF_MAX_S
        return original(*args, **kwargs)

    monkeypatch.setattr(NODE_TASKS["verify"], "retry", retry)
    result = NODE_TASKS["verify"].apply(args=("run-1", 3), throw=False)
    assert result.successful() and runtime.calls == 3
    assert seen == [first, first]


@pytest.mark.parametrize(("retries", "low", "high"), [
    pytest.param(0, 0.25, 0.5, id="first"),
    pytest.param(3, 2.0, 4.0, id="doubling"),
    pytest.param(10, 7.5, 15.0, id="capped"),
    pytest.param(10_000, 7.5, 15.0, id="capped-huge"),
])
def test_retry_delay__capped_exponential_with_jitter(retries: int, low: float,
                                                     high: float) -> None:
    rng = random.Random(7)
    delays = [nodes_module.retry_delay(retries, remaining_s=1e9, rng=rng) for _ in range(200)]
    assert all(low <= d <= high for d in delays)
    assert len(set(delays)) > 100  # jittered, not in lockstep


def test_retry_delay__never_past_the_budget() -> None:
    assert nodes_module.retry_delay(10, remaining_s=1.5) <= 1.5
    assert nodes_module.retry_delay(10, remaining_s=-3) == 0


def test_the_retry_budget_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERITY_STORE_RETRY_BUDGET_S", "75")
    nodes_module.retry_budget_s.cache_clear()
    try:
        assert nodes_module.retry_budget_s() == 75.0
    finally:
        nodes_module.retry_budget_s.cache_clear()


def test_other_errors_are_not_retried(flaky: Any) -> None:
    runtime = flaky(failures=1, error=RuntimeError("a bug"))
    services.set_runtime(runtime)
    result = NODE_TASKS["plan"].apply(args=("run-1", 0), throw=False)
    assert result.failed() and isinstance(result.result, RuntimeError)
    assert runtime.calls == 1
