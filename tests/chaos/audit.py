"""How a batch ended, from the rows the drill read: a pure function of data.

A run is *stuck* when it is not terminal after the drain. It *ended once* when its trace holds
exactly one terminal marker: the `finalize`/`completed` event of a released run, a `cancelled`
event, or (a FAILED run) the failure events that nothing follows. Tool rows must be unique per
`(run_id, tool_call_id)` and none may be left PROJECTING in an ended run. With the fake server,
every request it saw must be one `llm_attempt` row: rows and requests are matched by role and
count (a request carries its role, not its run), and no single-call role (planner, verifier,
composer, knowledge) may have answered twice in one run and cycle (a model call run twice). A
row still `in_flight` or `abandoned` (its worker died around the request) may or may not have
reached the server: it can stand for a request, and is never counted beyond them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"SUCCESS", "FALLBACK", "FAILED", "CANCELLED"})
UNCONFIRMED = frozenset({"in_flight", "abandoned"})
SINGLE_CALL_ROLES = frozenset({"planner", "verifier", "composer", "knowledge"})
"""Roles answered by one successful call per run and cycle (the Executor takes turns)."""
"""Outcomes of journaled attempts whose worker died before the answer came back."""
_SHOWN = 10


def _failure_kind(kind: str) -> bool:
    return "fail" in kind or "deadline" in kind


def terminal_markers(events: Sequence[tuple[str, str, Any]]) -> tuple[int, int]:
    """(terminal markers, events after the first one) of one run's `(node, kind, payload)`
    events in seq order."""
    trailing = len(events)
    while trailing > 0 and _failure_kind(events[trailing - 1][1]):
        trailing -= 1
    marks = [i for i, (node, kind, _) in enumerate(events)
             if (node == "finalize" and kind == "completed") or kind == "cancelled"
             or (i >= trailing and _failure_kind(kind))]
    if not marks:
        return 0, 0
    late = sum(1 for i in range(marks[0] + 1, len(events)) if i not in marks)
    return len(marks), late


def _failures(status: dict[str, str], trace: dict[str, list[tuple[str, str, Any]]],
              ) -> list[dict[str, Any]]:
    """The last failure event (node, kind, payload) of each FAILED run, at most `_SHOWN`."""
    shown = []
    for run_id, run_status in sorted(status.items()):
        if run_status != "FAILED" or len(shown) >= _SHOWN:
            continue
        last = next((e for e in reversed(trace[run_id]) if _failure_kind(e[1])), None)
        shown.append({"run_id": run_id, "event": list(last) if last else None})
    return shown


@dataclass
class Audit:
    """The figures of one drained batch; `problems()` lists every broken promise."""

    runs_submitted: int
    ended_by_status: dict[str, int]
    stuck: list[dict[str, Any]]
    finalize_duplicates: int
    unmarked_terminal: int
    late_events: int
    tool_duplicate_rows: int
    projecting_left: int
    projecting_left_cancelled: int
    attempt_duplicate_keys: int
    double_calls: int
    attempt_rows_by_role: dict[str, int]
    unconfirmed_by_role: dict[str, int]
    requests_by_role: dict[str, int] | None
    drain_time_s: float
    reconciler_events: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    failed_checks: list[str] = field(default_factory=list)

    def expect(self, ok: bool, what: str) -> None:
        """A drill's own promise: `what` is listed among the problems unless `ok`."""
        if not ok:
            self.failed_checks.append(what)

    @property
    def attempts_extra(self) -> int:
        if self.requests_by_role is None:
            return 0
        roles = set(self.attempt_rows_by_role) | set(self.requests_by_role)
        confirmed = {r: self.attempt_rows_by_role.get(r, 0) - self.unconfirmed_by_role.get(r, 0)
                     for r in roles}
        return sum(max(0, confirmed[r] - self.requests_by_role.get(r, 0)) for r in roles)

    @property
    def attempts_missing(self) -> int:
        if self.requests_by_role is None:
            return 0
        roles = set(self.attempt_rows_by_role) | set(self.requests_by_role)
        return sum(max(0, self.requests_by_role.get(r, 0) - self.attempt_rows_by_role.get(r, 0))
                   for r in roles)

    @property
    def duplicates(self) -> dict[str, int]:
        return {"finalize": self.finalize_duplicates,
                "tool": self.tool_duplicate_rows + self.projecting_left,
                "attempt": self.attempt_duplicate_keys + self.attempts_extra
                + self.double_calls}

    def summary(self) -> dict[str, Any]:
        """The bench's JSON for this drill."""
        return {
            "runs_submitted": self.runs_submitted,
            "ended_by_status": dict(sorted(self.ended_by_status.items())),
            "stuck_after_drain": len(self.stuck),
            "duplicates": self.duplicates,
            "drain_time_s": self.drain_time_s,
            "attempts": {"rows_by_role": dict(sorted(self.attempt_rows_by_role.items())),
                         "requests_by_role": None if self.requests_by_role is None
                         else dict(sorted(self.requests_by_role.items())),
                         "unconfirmed_rows_by_role": dict(sorted(
                             self.unconfirmed_by_role.items())),
                         "rows_missing": self.attempts_missing},
            "reconciler_events": dict(sorted(self.reconciler_events.items())),
            "ended_without_terminal_event": self.unmarked_terminal,
            "events_after_terminal": self.late_events,
            "projecting_left": {"ended": self.projecting_left,
                                "cancelled": self.projecting_left_cancelled},
            "stuck_runs": self.stuck[:_SHOWN],
            "failed_checks": self.failed_checks,
            "problems": self.problems(),
            **self.extra,
        }

    def problems(self) -> list[str]:
        """Every promise of the drill this batch broke, one line each (empty: none)."""
        found = []
        if self.stuck:
            found.append(f"{len(self.stuck)} of {self.runs_submitted} runs never ended: "
                         f"{self.stuck[:3]}")
        if self.drain_time_s < 0 and not self.stuck:
            found.append("the drain timed out")
        checks = {
            "runs with more than one terminal marker": self.finalize_duplicates,
            "ended runs without a terminal event": self.unmarked_terminal,
            "events after a run's terminal event": self.late_events,
            "duplicate (run_id, tool_call_id) rows": self.tool_duplicate_rows,
            "tool rows left PROJECTING in ended runs": self.projecting_left,
            "duplicate attempt keys": self.attempt_duplicate_keys,
            "single-call roles answered twice in one run and cycle": self.double_calls,
            "llm_attempt rows beyond the requests the fake saw": self.attempts_extra,
            "requests the fake saw without an llm_attempt row": self.attempts_missing,
        }
        found += [f"{n} {what}" for what, n in checks.items() if n]
        found += self.failed_checks
        if (self.attempts_extra or self.attempts_missing) and self.requests_by_role is not None:
            found.append(f"attempt rows {self.attempt_rows_by_role} against requests "
                         f"{self.requests_by_role}")
        return found


def audit_batch(
    run_ids: Sequence[str],
    *,
    runs: Sequence[tuple[Any, ...]],
    events: Sequence[tuple[Any, ...]],
    tools: Sequence[tuple[Any, ...]],
    attempts: Sequence[tuple[Any, ...]],
    requests: Sequence[dict[str, Any]] | None,
    drain_time_s: float,
) -> Audit:
    """The audit of `run_ids` from their rows: runs `(run_id, status, node, version, source)`,
    events `(run_id, seq, node, kind, payload)` in seq order, tools `(run_id, tool_call_id,
    tool_name, status, error, arguments)`, attempts `(run_id, role, cycle, number, outcome)`
    and the fake server's recorded Messages requests (None: no fake server)."""
    status = {row[0]: row[1] for row in runs}
    trace: dict[str, list[tuple[str, str, Any]]] = defaultdict(list)
    for run_id, _seq, node, kind, payload in events:
        trace[run_id].append((node, kind, payload))
    stuck, duplicates, unmarked, late = [], 0, 0, 0
    for row in runs:
        run_id, run_status, node, version = row[:4]
        if run_status not in TERMINAL:
            last = trace[run_id][-1][:2] if trace[run_id] else None
            stuck.append({"run_id": run_id, "status": run_status, "node": node,
                          "version": version, "last_event": last})
            continue
        marks, after = terminal_markers(trace[run_id])
        duplicates += marks > 1
        unmarked += marks == 0
        late += after
    missing = [r for r in run_ids if r not in status]
    stuck += [{"run_id": r, "status": None, "node": None, "version": None, "last_event": None}
              for r in missing]
    tool_keys = Counter((row[0], row[1]) for row in tools)
    projecting = [row[0] for row in tools if row[3] == "PROJECTING" and status.get(row[0])
                  in TERMINAL]
    cancelled = sum(1 for r in projecting if status[r] == "CANCELLED")
    attempt_keys = Counter(tuple(row[:4]) for row in attempts)
    answered = Counter(tuple(row[:3]) for row in attempts
                       if row[1] in SINGLE_CALL_ROLES and row[4] == "ok")
    by_role = Counter(row[1] for row in attempts)
    seen = None if requests is None else dict(Counter(str(r["role"]) for r in requests))
    return Audit(
        runs_submitted=len(run_ids),
        ended_by_status=dict(Counter(s for s in status.values() if s in TERMINAL)),
        stuck=stuck,
        finalize_duplicates=duplicates,
        unmarked_terminal=unmarked,
        late_events=late,
        tool_duplicate_rows=sum(n - 1 for n in tool_keys.values()),
        projecting_left=len(projecting) - cancelled,
        projecting_left_cancelled=cancelled,
        attempt_duplicate_keys=sum(n - 1 for n in attempt_keys.values()),
        double_calls=sum(n - 1 for n in answered.values()),
        extra={"answered_twice": [list(k) for k, n in answered.items() if n > 1][:_SHOWN],
               "failures": _failures(status, trace)},
        attempt_rows_by_role=dict(by_role),
        unconfirmed_by_role=dict(Counter(row[1] for row in attempts if row[4] in UNCONFIRMED)),
        requests_by_role=seen,
        drain_time_s=drain_time_s,
        reconciler_events=dict(Counter(kind for _, _, node, kind, _ in events
                                       if node == "reconcile")),
    )
