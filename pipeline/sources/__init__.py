"""Data sources: where tools' queries go (a scenario folder, or Prometheus, Alertmanager, Loki,
Kubernetes and a runbook folder named in the sources file)."""

from pipeline.data.source import (
    LOG_FETCH_LIMIT,
    AlertQuery,
    BackendStatus,
    ChangeQuery,
    DataSource,
    EventQuery,
    Fetched,
    LogQuery,
    MetricQuery,
)
from pipeline.errors import SourceError, UnknownSourceError

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
    "SourceError",
    "UnknownSourceError",
]
