"""Incident data records: what a scenario's files hold, validated, and the indexed forms tools read.

Timestamps are ISO 8601; one without an offset is read as UTC. Tools print every time in one
canonical form (`2026-11-30T14:03:12Z`, see `iso`), so a claim can quote it verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


Timestamp = Annotated[datetime, AfterValidator(_utc)]
"""An ISO 8601 time, normalized to UTC."""

LEVELS = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")
LEVEL_RANK = {name: rank for rank, name in enumerate(LEVELS)}
_LEVEL_ALIASES = {"WARNING": "WARN", "ERR": "ERROR", "CRITICAL": "FATAL", "TRACE": "DEBUG"}


def _level(value: object) -> object:
    if isinstance(value, str):
        upper = value.strip().upper()
        return _LEVEL_ALIASES.get(upper, upper)
    return value


Level = Annotated[Literal["DEBUG", "INFO", "WARN", "ERROR", "FATAL"], BeforeValidator(_level)]
"""A log level; WARNING, ERR, CRITICAL and TRACE are read as WARN, ERROR, FATAL and DEBUG."""


def iso(moment: datetime) -> str:
    """The canonical text of a time: UTC, whole seconds, `Z` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Record(BaseModel):
    """Base of the file records: unknown fields are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class LogRecord(Record):
    """One line of `logs.jsonl`."""

    ts: Timestamp = Field(description="When it was logged.")
    service: str = Field(min_length=1, description="Service that logged it.")
    level: Level = Field(description="DEBUG, INFO, WARN, ERROR or FATAL.")
    message: str = Field(min_length=1, description="The log message.")
    pod: str | None = Field(default=None, description="Pod or instance, if known.")
    trace_id: str | None = Field(default=None, description="Trace id, if any.")


class MetricRow(Record):
    """One row of `metrics.csv`."""

    ts: Timestamp = Field(description="Sample time.")
    service: str = Field(min_length=1, description="Service measured.")
    metric: str = Field(min_length=1, description="Metric name, e.g. http_error_rate.")
    value: float = Field(allow_inf_nan=False, description="Sample value.")
    unit: str = Field(default="", description="%, ms, MiB, rps, cores, count ...")


class Alert(Record):
    """One alert of `alerts.json`."""

    name: str = Field(min_length=1, description="Alert rule name.")
    service: str = Field(min_length=1, description="Service it is about.")
    severity: str = Field(default="warning", description="critical, warning, info ...")
    state: Literal["firing", "resolved"] = Field(description="firing or resolved.")
    starts_at: Timestamp = Field(description="When it started firing.")
    ends_at: Timestamp | None = Field(default=None, description="When it resolved, if it did.")
    summary: str = Field(default="", description="The alert's description.")


class Deployment(Record):
    """One rollout or configuration change of `deployments.json`."""

    service: str = Field(min_length=1, description="Service changed.")
    version: str = Field(min_length=1, description="New version or config revision.")
    previous_version: str | None = Field(default=None, description="Version it replaced.")
    deployed_at: Timestamp = Field(description="When the rollout started.")
    author: str | None = Field(default=None, description="Who or what deployed it.")
    change: str = Field(default="", description="What changed, in words.")
    kind: Literal["deploy", "config"] = Field(default="deploy", description="deploy or config.")
    status: str = Field(default="succeeded", description="succeeded, failed, rolled_back ...")


class KubeEvent(Record):
    """One Kubernetes-style event of `events.json`."""

    ts: Timestamp = Field(description="Last time the event was seen.")
    namespace: str = Field(min_length=1, description="Namespace.")
    kind: str = Field(min_length=1, description="Object kind: Pod, Deployment, Certificate ...")
    object: str = Field(min_length=1, description="Object name.")
    reason: str = Field(min_length=1, description="OOMKilled, BackOff, Unhealthy, Failed ...")
    message: str = Field(default="", description="Event message.")
    count: int = Field(default=1, ge=1, description="How many times it was seen.")
    type: Literal["Normal", "Warning"] = Field(default="Warning", description="Event type.")


class Runbook(Record):
    """One runbook: front matter (doc_id, title) and its Markdown text."""

    doc_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Stable id.")
    title: str = Field(min_length=1, description="Title.")
    text: str = Field(description="Body, Markdown.")
    tags: tuple[str, ...] = Field(default=(), description="Optional keywords.")


# Message templating: variable parts (times, ids, addresses, numbers) become placeholders so
# that lines differing only in them group under one pattern.
_TEMPLATE_RULES = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<ts>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
     "<uuid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"(?<=[-=_/:])[0-9a-f]{8,}\b|\b(?=[0-9a-f]*\d)[0-9a-f]{6,}\b"), "<id>"),
    (re.compile(r"\b\d+(?:\.\d+)?\b"), "<n>"),
]


def message_pattern(message: str) -> str:
    """The message with its variable parts replaced by placeholders."""
    for pattern, placeholder in _TEMPLATE_RULES:
        message = pattern.sub(placeholder, message)
    return message


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A log line as tools search it: time, canonical ts text, level rank and pattern."""

    at: datetime
    ts: str
    service: str
    level: str
    rank: int
    message: str
    lowered: str
    pattern: str
    pod: str | None = None
    trace_id: str | None = None

    @classmethod
    def from_record(cls, record: LogRecord) -> LogEntry:
        """Index one validated record."""
        return cls(
            at=record.ts, ts=iso(record.ts), service=record.service, level=record.level,
            rank=LEVEL_RANK[record.level], message=record.message,
            lowered=record.message.lower(), pattern=message_pattern(record.message),
            pod=record.pod, trace_id=record.trace_id,
        )


@dataclass(slots=True)
class MetricSeries:
    """One metric of one service, in time order."""

    service: str
    metric: str
    unit: str
    times: list[datetime] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
