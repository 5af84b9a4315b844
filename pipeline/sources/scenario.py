"""A scenario folder as a data source: every query answered in memory from the loaded files.

    source = ScenarioSource(load_scenario(scenario_path("checkout-pool-exhaustion")))
    source.name                                   # 'scenario:checkout-pool-exhaustion'
    source.search_logs(LogQuery(start=s, end=e, service="checkout-service", min_level="ERROR"))

Windows are closed on both ends. Totals are always known, nothing is read off a wire
(`fetched_bytes` 0) and no backend query is recorded (`queries` empty), so tool results over a
scenario are what they were before sources were pushed down.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.data.records import (
    LEVEL_RANK,
    Alert,
    Deployment,
    KubeEvent,
    LogEntry,
    MetricSeries,
)
from pipeline.data.runbooks import RunbookIndex
from pipeline.data.source import (
    AlertQuery,
    ChangeQuery,
    EventQuery,
    Fetched,
    LogQuery,
    MetricQuery,
)
from pipeline.scenarios import Scenario, default_scenarios_dir

SCENARIO_PREFIX = "scenario:"
"""A shipped scenario's source reference is `scenario:NAME`."""


def scenario_reference(scenario: Scenario) -> str:
    """`scenario:NAME` for a shipped scenario, else the folder's absolute path."""
    if scenario.path.resolve().parent == default_scenarios_dir().resolve():
        return SCENARIO_PREFIX + scenario.name
    return str(scenario.path.resolve())


class ScenarioSource:
    """A loaded scenario behind the `DataSource` protocol. `now` is the scenario's own unless
    `now` is given (a run pinned to another time)."""

    def __init__(self, scenario: Scenario, *, name: str | None = None,
                 now: datetime | None = None) -> None:
        self.scenario = scenario
        self._name = name or scenario_reference(scenario)
        self._now = now

    @property
    def name(self) -> str:
        """`scenario:NAME`, a configured source's name, or the folder path."""
        return self._name

    @property
    def now(self) -> datetime:
        """The pinned time, else the scenario's `now`."""
        return self._now or self.scenario.now

    @property
    def path(self) -> Path:
        """The scenario folder."""
        return self.scenario.path

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        """Lines of the service in the window at or above the level holding every term."""
        entries = _between(self.scenario.log_entries(query.service), query.start, query.end)
        rank = LEVEL_RANK[query.min_level] if query.min_level else 0
        matched = [e for e in entries
                   if e.rank >= rank and all(t in e.lowered for t in query.terms)]
        return Fetched(items=matched[: query.limit], total=len(matched))

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        """Series whose name holds `metric`, cut to the window; empty ones left out."""
        needle = (query.metric or "").lower()
        found = []
        for series in self.scenario.series:
            if query.service is not None and series.service != query.service:
                continue
            if needle and needle not in series.metric.lower():
                continue
            lo = bisect.bisect_left(series.times, query.start)
            hi = bisect.bisect_right(series.times, query.end)
            if lo < hi:
                found.append(MetricSeries(series.service, series.metric, series.unit,
                                          series.times[lo:hi], series.values[lo:hi]))
        return Fetched(items=found, total=len(found))

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        """Alerts active at any time in the window, by start then name."""
        alerts = sorted(
            (a for a in self.scenario.alert_list
             if (query.service is None or a.service == query.service)
             and (query.state == "any" or a.state == query.state)
             and a.starts_at <= query.end and (a.ends_at is None or a.ends_at >= query.start)),
            key=lambda a: (a.starts_at, a.name),
        )
        return Fetched(items=alerts, total=len(alerts))

    def list_deployments(self, query: ChangeQuery) -> Fetched[Deployment]:
        """Rollouts started in the window, oldest first."""
        changes = [d for d in self.scenario.deployment_list
                   if (query.service is None or d.service == query.service)
                   and query.start <= d.deployed_at <= query.end]
        return Fetched(items=changes, total=len(changes))

    def get_events(self, query: EventQuery) -> Fetched[KubeEvent]:
        """Events of the service's objects in the window, oldest first."""
        events = [e for e in self.scenario.event_list
                  if query.start <= e.ts <= query.end and _wanted(e, query)]
        return Fetched(items=events, total=len(events))

    def runbook_index(self) -> RunbookIndex:
        """The scenario's runbooks, indexed once."""
        return self.scenario.runbook_index()


def _wanted(event: KubeEvent, query: EventQuery) -> bool:
    return (
        (query.service is None or event.object == query.service
         or event.object.startswith(query.service + "-"))
        and (query.namespace is None or event.namespace == query.namespace)
        and (query.reason is None or event.reason.lower() == query.reason.lower())
        and (query.type is None or event.type == query.type)
    )


def _between(entries: Sequence[LogEntry], start: datetime, end: datetime) -> Sequence[LogEntry]:
    times = _Times(entries)
    return entries[bisect.bisect_left(times, start): bisect.bisect_right(times, end)]


class _Times(Sequence[datetime]):
    """A view of entry times for bisect, without copying."""

    def __init__(self, entries: Sequence[LogEntry]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index: Any) -> Any:
        return self._entries[index].at


__all__ = ["SCENARIO_PREFIX", "ScenarioSource", "scenario_reference"]
