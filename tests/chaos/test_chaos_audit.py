"""The drills' audit catches what it must: a test of the harness, with data only."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.audit import audit_batch, terminal_markers


def _events(*pairs: str) -> list[tuple[str, str, Any]]:
    return [(pair.split("/")[0], pair.split("/")[1], {}) for pair in pairs]


@pytest.mark.parametrize(("events", "expected"), [
    pytest.param(["submit/accepted", "plan/completed", "finalize/completed"], (1, 0),
                 id="released-once"),
    pytest.param(["submit/accepted", "finalize/completed", "finalize/completed"], (2, 0),
                 id="released-twice"),
    pytest.param(["submit/accepted", "plan/failed", "fallback/completed",
                  "finalize/completed"], (1, 0), id="planner-failure-routed-to-fallback"),
    pytest.param(["submit/accepted", "verify/failed"], (1, 0), id="failed-once"),
    pytest.param(["submit/accepted", "verify/failed", "verify/failed"], (2, 0),
                 id="failed-twice"),
    pytest.param(["submit/accepted", "gatekeep/cancelled", "verify/completed"], (1, 1),
                 id="a-node-after-the-cancel"),
    pytest.param(["submit/accepted", "plan/completed"], (0, 0), id="no-terminal-event"),
])
def test_terminal_markers(events: list[str], expected: tuple[int, int]) -> None:
    assert terminal_markers(_events(*events)) == expected


def _audit(**rows: Any) -> Any:
    base: dict[str, Any] = {
        "runs": [("r1", "SUCCESS", "finalize", 6, None), ("r2", "RUNNING", "execute", 2, None)],
        "events": [("r1", 1, "submit", "accepted", {}), ("r1", 2, "finalize", "completed", {}),
                   ("r2", 1, "submit", "accepted", {}), ("r2", 2, "execute", "tool_calls", {})],
        "tools": [("r1", "t1", "search_logs", "READY", None, {})],
        "attempts": [("r1", "verifier", 0, 1, "ok")],
        "requests": None,
    }
    return audit_batch(["r1", "r2", "r3"], drain_time_s=-1.0, **(base | rows))


def test_audit_finds_stuck_and_missing_runs() -> None:
    audit = _audit()
    assert [s["run_id"] for s in audit.stuck] == ["r2", "r3"]
    assert audit.stuck[0]["last_event"] == ("execute", "tool_calls")
    assert audit.summary()["stuck_after_drain"] == 2
    assert audit.ended_by_status == {"SUCCESS": 1}
    assert any("never ended" in p for p in audit.problems())


def test_audit_counts_projecting_rows_of_ended_runs_as_tool_duplicates() -> None:
    audit = _audit(tools=[("r1", "t1", "search_logs", "PROJECTING", None, {}),
                          ("r2", "t2", "search_logs", "PROJECTING", None, {})])
    assert audit.duplicates["tool"] == 1  # r2 is still running: not yet a defect


def test_audit_matches_attempt_rows_to_the_fake_servers_requests_by_role() -> None:
    requests = [{"role": "verifier"}, {"role": "verifier"}, {"role": "planner"}]
    audit = _audit(requests=requests,
                   attempts=[("r1", "verifier", 0, 1, "ok"), ("r1", "composer", 0, 1, "ok")])
    assert audit.attempts_missing == 2  # a verifier and a planner request without a row
    assert audit.attempts_extra == 1  # a composer row without a request
    assert audit.duplicates["attempt"] == 1
    assert "requests the fake saw without an llm_attempt row" in " ".join(audit.problems())


def test_an_abandoned_row_may_stand_for_a_request_but_never_beyond_them() -> None:
    requests = [{"role": "planner"}]
    kept = _audit(requests=requests, attempts=[("r1", "planner", 0, 1, "abandoned"),
                                               ("r1", "planner", 0, 2, "ok")])
    assert (kept.attempts_extra, kept.attempts_missing) == (0, 0)
    beyond = _audit(requests=requests, attempts=[("r1", "planner", 0, 1, "ok"),
                                                 ("r1", "planner", 0, 2, "ok")])
    assert beyond.attempts_extra == 1


def test_a_verifier_that_answered_twice_in_a_cycle_is_a_duplicate() -> None:
    twice = _audit(attempts=[("r1", "verifier", 0, 1, "ok"), ("r1", "verifier", 0, 2, "ok"),
                             ("r1", "verifier", 1, 3, "ok"), ("r1", "executor", 0, 1, "ok"),
                             ("r1", "executor", 0, 2, "ok")])
    assert twice.duplicates["attempt"] == 1  # cycle 1 and the Executor's turns are fine
    retried = _audit(attempts=[("r1", "verifier", 0, 1, "invalid_output"),
                               ("r1", "verifier", 0, 2, "ok")])
    assert retried.duplicates["attempt"] == 0


def test_a_drills_own_check_is_a_problem() -> None:
    audit = _audit(runs=[("r1", "SUCCESS", "finalize", 6, None)])
    audit.expect(False, "the probe batch was slow")
    assert "the probe batch was slow" in audit.problems()
