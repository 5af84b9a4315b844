"""Scopes tell the truth about alerts (issue 23, item 3): Alertmanager lists only what fires
at the time of the call, so its answer covers that moment, not the window asked; a source
with Prometheus too reads the window's history from `ALERTS` and merges Alertmanager's
current alerts in, so an alert that fired and resolved in the window is not lost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from pipeline.data.records import Alert
from pipeline.data.source import AlertQuery, Fetched
from pipeline.sources.alertmanager import Alertmanager
from pipeline.sources.composite import merge_alerts
from pipeline.sources.config import AlertmanagerBackend
from pipeline.tools.changes import ListAlertsArgs, list_alerts

NOW = datetime(2026, 12, 1, 17, 0, 30, tzinfo=UTC)
T = datetime(2026, 12, 1, 16, 0, tzinfo=UTC)


def _alert(name: str, minute: int, end: int | None = None, service: str = "checkout") -> Alert:
    return Alert(name=name, service=service, severity="critical",
                 state="firing" if end is None else "resolved",
                 starts_at=T + timedelta(minutes=minute),
                 ends_at=None if end is None else T + timedelta(minutes=end))


def _key(alert: Alert) -> tuple[str, str, int, int | None]:
    def minute(at: datetime) -> int:
        return int((at - T).total_seconds() // 60)
    return (alert.name, alert.service, minute(alert.starts_at),
            None if alert.ends_at is None else minute(alert.ends_at))


@pytest.mark.parametrize(("history", "current", "expected"), [
    pytest.param([_alert("HighErrorRate", 5, 20)], [],
                 [("HighErrorRate", "checkout", 5, 20)],
                 id="issue23: fired and resolved in the window, nothing fires now: kept"),
    pytest.param([_alert("HighErrorRate", 4)], [_alert("HighErrorRate", 3)],
                 [("HighErrorRate", "checkout", 3, None)],
                 id="firing in both: Alertmanager's record (exact start)"),
    pytest.param([_alert("HighErrorRate", 5, 20), _alert("HighErrorRate", 40)],
                 [_alert("HighErrorRate", 40)],
                 [("HighErrorRate", "checkout", 5, 20), ("HighErrorRate", "checkout", 40, None)],
                 id="an earlier run of the same alert stays beside the current one"),
    pytest.param([_alert("HighErrorRate", 4)], [_alert("HighErrorRate", 3, service="cart")],
                 [("HighErrorRate", "cart", 3, None), ("HighErrorRate", "checkout", 4, None)],
                 id="same name, other service: both"),
    pytest.param([], [_alert("TargetDown", 50)], [("TargetDown", "checkout", 50, None)],
                 id="only Alertmanager knows it (another Prometheus): kept"),
])
def test_merge_alerts(history: list[Alert], current: list[Alert],
                      expected: list[tuple[str, str, int, int | None]]) -> None:
    merged = merge_alerts(Fetched(items=history, total=len(history), queries=("prom",)),
                          Fetched(items=current, total=len(current), queries=("am",),
                                  as_of=NOW))
    assert [_key(a) for a in merged.items] == expected
    assert merged.as_of is None and merged.queries == ("prom", "am")
    assert merged.total == len(expected)


class _Source:
    """A DataSource answering alerts with one fixed `Fetched`."""

    name = "test"
    now = NOW

    def __init__(self, fetched: Fetched[Alert]) -> None:
        self.fetched = fetched

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        return self.fetched


def _scope(fetched: Fetched[Alert]) -> dict[str, Any]:
    output = list_alerts(_Source(fetched), ListAlertsArgs())  # type: ignore[arg-type]
    window = output.scope.window
    assert window is not None
    return {"start": window.start, "end": window.end}


def test_list_alerts__an_answer_for_now_is_scoped_now_not_the_window() -> None:
    assert _scope(Fetched(items=[], total=0, as_of=NOW)) == {
        "start": "2026-12-01T17:00:30Z", "end": "2026-12-01T17:00:30Z"}


def test_list_alerts__a_history_answer_covers_the_window() -> None:
    assert _scope(Fetched(items=[], total=0)) == {
        "start": "2026-12-01T15:00:30Z", "end": "2026-12-01T17:00:30Z"}


def test_alertmanager__answers_as_of_the_time_of_the_call() -> None:
    backend = Alertmanager("test", AlertmanagerBackend(url="http://am"),
                           transport=httpx.MockTransport(lambda _: httpx.Response(200, json=[])),
                           clock=lambda: NOW)
    fetched = backend.list_alerts(AlertQuery(T, T + timedelta(hours=2)))
    assert fetched.as_of == NOW
