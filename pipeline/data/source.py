"""What a data source answers: one query per tool need, pushed down to where the data lives.

Tools never ask for "every log line"; they ask for the lines of one service in one window that
match a filter, at most `limit` of them, and the source says how many matched in all. Every
answer names the exact queries it ran (PromQL, LogQL, an API path with its parameters), so a
claim's binding says what was asked and a reader can run it again.

    fetched = source.search_logs(LogQuery(service="checkout", start=s, end=e, limit=2000))
    fetched.items      # at most 2,000 LogEntry, in time order
    fetched.total      # every match in the backend (None when it cannot tell)
    fetched.queries    # ('GET /loki/api/v1/query_range?query={app="checkout"}&...',)

A scenario folder (`pipeline.sources.scenario.ScenarioSource`) and the configured backends
(Prometheus, Alertmanager, Loki, Kubernetes, a runbook folder) implement the same protocol.
Backends raise `SourceError` with a one-line reason that never holds a credential; the tool
runner turns it into an ERROR invocation, never a failed run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, Protocol, TypeVar

from pipeline.data.records import Alert, Deployment, KubeEvent, LogEntry, MetricSeries
from pipeline.data.runbooks import RunbookIndex

ItemT = TypeVar("ItemT")

LOG_FETCH_LIMIT = 5000
"""Log lines a tool asks a source for per window; counts beyond it come from `total`."""


@dataclass(frozen=True, slots=True)
class LogQuery:
    """Log lines of `service` (all when None) in [start, end], at `min_level` or above, whose
    message holds every word of `terms` (lower-case, matched case-insensitively), at most
    `limit` of them, oldest first."""

    start: datetime
    end: datetime
    service: str | None = None
    min_level: str | None = None
    terms: tuple[str, ...] = ()
    limit: int = LOG_FETCH_LIMIT


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """Series of `service` (all when None) whose name contains `metric` (case-insensitive; all
    when None), with their samples in [start, end]."""

    start: datetime
    end: datetime
    service: str | None = None
    metric: str | None = None


@dataclass(frozen=True, slots=True)
class AlertQuery:
    """Alerts of `service` (all when None) active at any time in [start, end] in `state`."""

    start: datetime
    end: datetime
    service: str | None = None
    state: Literal["firing", "resolved", "any"] = "any"


@dataclass(frozen=True, slots=True)
class ChangeQuery:
    """Rollouts and configuration changes of `service` (all when None) in [start, end]."""

    start: datetime
    end: datetime
    service: str | None = None


@dataclass(frozen=True, slots=True)
class EventQuery:
    """Kubernetes events in [start, end] of the objects of `service` (name equal to it or
    starting with `service-`; all when None), optionally one namespace, reason and type."""

    start: datetime
    end: datetime
    service: str | None = None
    namespace: str | None = None
    reason: str | None = None
    type: Literal["Normal", "Warning"] | None = None


@dataclass(frozen=True, slots=True)
class Fetched(Generic[ItemT]):
    """A source's answer: the items (bounded, in the order the query defines), how many
    matched in the backend (None: unknown; equal to len(items) when nothing was cut), the
    exact queries run, the bytes read off the wire (0 for in-memory sources), and `as_of`
    when the backend answered about one moment only, not the window asked (Alertmanager holds
    the alerts active now and no history), so nothing is said of the rest of the window, and
`note` when the backend has something to say of how it matched the query."""

    items: Sequence[ItemT]
    total: int | None = None
    queries: tuple[str, ...] = ()
    fetched_bytes: int = 0
    as_of: datetime | None = None
    note: str = ""
    """What the backend says of how it read the query, when the reader needs it: the service
    matched under another label than the configured one, or matched nothing at all."""

    @property
    def truncated(self) -> bool:
        """Whether the backend holds more matches than were returned."""
        return self.total is not None and self.total > len(self.items)


@dataclass(frozen=True, slots=True)
class BackendStatus:
    """One line of `verity sources check`: a backend probed."""

    source: str
    backend: str
    url: str
    reachable: bool
    version: str | None = None
    auth_ok: bool | None = None
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class DataSource(Protocol):
    """Read access to the data of one incident question, one pushed-down query per need."""

    @property
    def name(self) -> str:
        """The source's reference, as runs store it (`prod`, `scenario:checkout-...`)."""
        ...

    @property
    def now(self) -> datetime:
        """The time the question is asked; tools' default windows end here."""
        ...

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        """Matching log lines, oldest first, at most `query.limit`."""
        ...

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        """Matching series with their samples in the window (series with none are left out)."""
        ...

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        """Matching alerts, by start time then name."""
        ...

    def list_deployments(self, query: ChangeQuery) -> Fetched[Deployment]:
        """Matching rollouts and config changes, oldest first."""
        ...

    def get_events(self, query: EventQuery) -> Fetched[KubeEvent]:
        """Matching events, oldest first."""
        ...

    def runbook_index(self) -> RunbookIndex:
        """The BM25 index over the source's runbooks (empty when it has none)."""
        ...


__all__ = [
    "LOG_FETCH_LIMIT",
    "AlertQuery",
    "BackendStatus",
    "ChangeQuery",
    "DataSource",
    "EventQuery",
    "Fetched",
    "LogQuery",
    "MetricQuery",
]
