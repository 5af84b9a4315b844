"""The node tasks wait out a database that drops connections: StoreUnavailableError sends the
message again; any other error is not retried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.errors import StoreUnavailableError
from pipeline.runtime import NodeOutcome
from tasks import services
from tasks.nodes import NODE_TASKS, coordinate, tool


class FlakyRuntime:
    """Fails the first `failures` calls as a lost database would, then succeeds."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or StoreUnavailableError("database unavailable: server closed")
        self.calls = 0

    def _maybe_fail(self) -> None:
        self.calls += 1
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


def test_retries_stop_after_the_limit(flaky: Any) -> None:
    runtime = flaky(failures=100)
    services.set_runtime(runtime)
    result = NODE_TASKS["plan"].apply(args=("run-1", 0), throw=False)
    assert result.failed() and isinstance(result.result, StoreUnavailableError)
    assert runtime.calls == NODE_TASKS["plan"].max_retries + 1


def test_other_errors_are_not_retried(flaky: Any) -> None:
    runtime = flaky(failures=1, error=RuntimeError("a bug"))
    services.set_runtime(runtime)
    result = NODE_TASKS["plan"].apply(args=("run-1", 0), throw=False)
    assert result.failed() and isinstance(result.result, RuntimeError)
    assert runtime.calls == 1
