"""A configured source: one `DataSource` over the backends a `[sources.NAME]` entry names.

    logs         → Loki            ([sources.NAME.loki])
    metrics      → Prometheus      ([sources.NAME.prometheus])
    alerts       → Prometheus's `ALERTS` history when its `alerts` flag is on (the default),
                   with Alertmanager's current alerts merged in ([sources.NAME.alertmanager]);
                   Alertmanager alone answers for the time of the call only
    deployments  → Kubernetes      ([sources.NAME.kubernetes])
    events       → Kubernetes
    runbooks     → a Markdown folder ([sources.NAME.runbooks]); an empty index without one

A capability without a backend raises `SourceError` naming the table to add, which the tool
runner turns into an ERROR invocation. Backends are made on first use, once per source (one
connection pool each, shared by every run and by every pinned view, see `at`), from the
backend modules imported only then: a missing module is a `SourceError` too.
"""

from __future__ import annotations

import copy
import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast

from pipeline.data.records import Alert, Deployment, KubeEvent, LogEntry, MetricSeries
from pipeline.data.runbooks import RunbookIndex
from pipeline.data.source import (
    AlertQuery,
    BackendStatus,
    ChangeQuery,
    EventQuery,
    Fetched,
    LogQuery,
    MetricQuery,
)
from pipeline.errors import SourceError, VerityError
from pipeline.scenarios import read_runbooks
from pipeline.sources.config import Backend, SourceConfig


class Probe(Protocol):
    """What every backend has: a probe for `verity sources check`, and a pool to close."""

    def check(self) -> BackendStatus:
        """Reachable, version, auth ok."""
        ...

    def close(self) -> None:
        """Close the connection pool."""
        ...


class LogsBackend(Probe, Protocol):
    """Loki."""

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        """As `DataSource.search_logs`."""
        ...


class MetricsBackend(Probe, Protocol):
    """Prometheus."""

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        """As `DataSource.query_metrics`."""
        ...


class AlertsBackend(Probe, Protocol):
    """Alertmanager, or Prometheus."""

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        """As `DataSource.list_alerts`."""
        ...


class ChangesBackend(Probe, Protocol):
    """Kubernetes."""

    def list_deployments(self, query: ChangeQuery) -> Fetched[Deployment]:
        """As `DataSource.list_deployments`."""
        ...

    def get_events(self, query: EventQuery) -> Fetched[KubeEvent]:
        """As `DataSource.get_events`."""
        ...


BackendFactory = Callable[[str, Any], Probe]
"""Makes one backend: (source name, its config table) → the backend."""

BACKEND_CLASSES: dict[str, tuple[str, str]] = {
    "prometheus": ("pipeline.sources.prometheus", "Prometheus"),
    "alertmanager": ("pipeline.sources.alertmanager", "Alertmanager"),
    "loki": ("pipeline.sources.loki", "Loki"),
    "kubernetes": ("pipeline.sources.kubernetes", "Kubernetes"),
}
"""The class behind each backend table, imported on first use."""

HTTP_BACKENDS = tuple(BACKEND_CLASSES)
"""The backend tables of a source, in the order `verity sources` lists them."""


def backend_configs(config: SourceConfig) -> dict[str, Backend]:
    """The HTTP backends a source configures, by table name."""
    tables = {kind: getattr(config, kind) for kind in HTTP_BACKENDS}
    return {kind: table for kind, table in tables.items() if table is not None}


def _import_factory(source: str, kind: str) -> BackendFactory:
    module_name, class_name = BACKEND_CLASSES[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SourceError(f"{source}/{kind} is not available in this installation "
                          f"({type(exc).__name__}: {exc})") from None
    return cast(BackendFactory, getattr(module, class_name))


class _Backends:
    """The backends of one source, each made once on first use (thread-safe)."""

    def __init__(self, source: str, config: SourceConfig,
                 factories: Mapping[str, BackendFactory] | None) -> None:
        self.source = source
        self.config = config
        self._factories = dict(factories or {})
        self._made: dict[str, Probe] = {}
        self._lock = threading.Lock()

    def get(self, kind: str) -> Probe:
        with self._lock:
            made = self._made.get(kind)
            if made is None:
                table = getattr(self.config, kind)
                factory = self._factories.get(kind) or _import_factory(self.source, kind)
                made = self._made[kind] = factory(self.source, table)
            return made

    def close(self) -> None:
        with self._lock:
            made, self._made = list(self._made.values()), {}
        for backend in made:
            backend.close()


@dataclass(frozen=True)
class _RunbookFolder:
    path: Path
    signature: tuple[tuple[str, int, int], ...]
    index: RunbookIndex


class ConfiguredSource:
    """A `DataSource` over the backends of one configured source. `now` is the pinned time
    (`at`), else the wall clock (UTC, whole seconds)."""

    def __init__(self, name: str, config: SourceConfig, *,
                 factories: Mapping[str, BackendFactory] | None = None,
                 base_dir: Path | None = None) -> None:
        self._name = name
        self.config = config
        self._backends = _Backends(name, config, factories)
        self._base_dir = base_dir or Path.cwd()
        self._runbooks: list[_RunbookFolder] = []
        self._now: datetime | None = None

    def at(self, moment: datetime) -> ConfiguredSource:
        """The same source (the same backends and connection pools) pinned at `moment`."""
        pinned = copy.copy(self)
        pinned._now = moment
        return pinned

    @property
    def name(self) -> str:
        """The configured name."""
        return self._name

    @property
    def now(self) -> datetime:
        """The pinned time, else now."""
        return self._now or datetime.now(UTC).replace(microsecond=0)

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        """Loki's answer."""
        return cast(LogsBackend, self._need("loki", "logs")).search_logs(query)

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        """Prometheus's answer."""
        return cast(MetricsBackend, self._need("prometheus", "metrics")).query_metrics(query)

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        """The window's alert history from Prometheus's `ALERTS` (its `alerts` flag on) with
        what Alertmanager holds now merged in (`merge_alerts`); Alertmanager alone (or with a
        Prometheus that fails) answers only for now (its `as_of`)."""
        history = self.config.prometheus is not None and self.config.prometheus.alerts
        if self.config.alertmanager is None and not history:
            raise SourceError(f"{self.name} has no alerts backend (configure "
                              f"[sources.{self.name}.alertmanager])")
        if self.config.alertmanager is None:
            return cast(AlertsBackend, self._backends.get("prometheus")).list_alerts(query)
        current = cast(AlertsBackend, self._backends.get("alertmanager")).list_alerts(query)
        if not history:
            return current
        try:
            past = cast(AlertsBackend, self._backends.get("prometheus")).list_alerts(query)
        except SourceError:
            # Prometheus down or refusing: what fires now is still known, and the answer's
            # `as_of` keeps its scope to that moment (the metrics calls carry the error).
            return current
        return merge_alerts(past, current)

    def list_deployments(self, query: ChangeQuery) -> Fetched[Deployment]:
        """The Kubernetes API's rollout history."""
        backend = self._need("kubernetes", "deployments")
        return cast(ChangesBackend, backend).list_deployments(query)

    def get_events(self, query: EventQuery) -> Fetched[KubeEvent]:
        """The Kubernetes API's events."""
        return cast(ChangesBackend, self._need("kubernetes", "events")).get_events(query)

    def runbook_index(self) -> RunbookIndex:
        """The runbook folder's index (rebuilt when a file changes); empty without one."""
        if self.config.runbooks is None:
            return RunbookIndex([])
        folder = self.runbook_folder()
        assert folder is not None
        signature = _folder_signature(folder)
        cached = self._runbooks[0] if self._runbooks else None
        if cached is not None and cached.signature == signature:
            return cached.index
        if not folder.is_dir():
            raise SourceError(f"{self.name}/runbooks: no folder {folder}")
        try:
            index = RunbookIndex(read_runbooks(folder))
        except VerityError as exc:
            raise SourceError(f"{self.name}/runbooks: {exc}") from None
        self._runbooks[:] = [_RunbookFolder(folder, signature, index)]
        return index

    def runbook_folder(self) -> Path | None:
        """The runbook folder, relative paths read from the sources file's folder."""
        if self.config.runbooks is None:
            return None
        return (self._base_dir / Path(self.config.runbooks.path).expanduser()).resolve()

    def check(self) -> list[BackendStatus]:
        """Each backend probed, in table order, then the runbook folder; never raises."""
        statuses = []
        for kind, table in backend_configs(self.config).items():
            try:
                statuses.append(self._backends.get(kind).check())
            except Exception as exc:  # a probe reports, whatever went wrong
                reason = str(exc) if isinstance(exc, SourceError) \
                    else f"{type(exc).__name__}: {exc}"
                statuses.append(BackendStatus(source=self.name, backend=kind, url=table.url,
                                              reachable=False, detail=reason.splitlines()[0]))
        folder = self.runbook_folder()
        if folder is not None:
            statuses.append(self._check_runbooks(folder))
        return statuses

    def close(self) -> None:
        """Close every backend made so far."""
        self._backends.close()

    def _need(self, kind: str, capability: str) -> Probe:
        if getattr(self.config, kind) is None:
            raise SourceError(f"{self.name} has no {capability} backend (configure "
                              f"[sources.{self.name}.{kind}])")
        return self._backends.get(kind)

    def _check_runbooks(self, folder: Path) -> BackendStatus:
        try:
            count = len(self.runbook_index())
        except SourceError as exc:
            return BackendStatus(source=self.name, backend="runbooks", url=str(folder),
                                 reachable=False, detail=str(exc))
        return BackendStatus(source=self.name, backend="runbooks", url=str(folder),
                             reachable=True, detail=f"{count} runbooks")


def merge_alerts(history: Fetched[Alert], current: Fetched[Alert]) -> Fetched[Alert]:
    """The window's history (Prometheus `ALERTS`) with Alertmanager's current alerts: an
    alert in both (same name and service, the history's run still firing or ending at or
    after the current one's start) is kept as Alertmanager has it (its exact start and
    summary); the history's other runs stay, so resolved alerts are not lost. The answer
    covers the whole window: no `as_of`."""
    def same(past: Alert, now: Alert) -> bool:
        return (past.name, past.service) == (now.name, now.service) and (
            past.ends_at is None or past.ends_at >= now.starts_at)

    kept = [a for a in history.items if not any(same(a, now) for now in current.items)]
    alerts = sorted([*kept, *current.items], key=lambda a: (a.starts_at, a.name))
    cut = sum(max(0, (f.total or 0) - len(f.items)) for f in (history, current))
    return Fetched(items=alerts, total=len(alerts) + cut,
                   queries=history.queries + current.queries,
                   fetched_bytes=history.fetched_bytes + current.fetched_bytes,
                   note=history.note or current.note)


def _folder_signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    if not folder.is_dir():
        return ()
    stats = []
    for file in sorted(folder.glob("*.md")):
        stat = file.stat()
        stats.append((file.name, stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


__all__ = [
    "BACKEND_CLASSES",
    "HTTP_BACKENDS",
    "AlertsBackend",
    "BackendFactory",
    "ChangesBackend",
    "ConfiguredSource",
    "LogsBackend",
    "MetricsBackend",
    "Probe",
    "backend_configs",
    "merge_alerts",
]
