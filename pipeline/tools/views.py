"""Typed views of the built-in tools' stored projections, for agents that read results back.

Each view keeps the JSONPath of the element it came from, so a claim can bind to exactly the
value it restates. Views read the stored projection (what the Gatekeeper checks), never the raw
tool output.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from models.invocation import EvidenceStatus, LifecycleStatus, QueryScope, ToolInvocation
from pipeline.data.records import LEVEL_RANK
from pipeline.rules.untrusted import instruction_like


def parse_time(text: object) -> datetime | None:
    """A projected timestamp as a datetime, or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class CallView:
    """One invocation and its stored projection as JSON."""

    invocation: ToolInvocation

    @cached_property
    def document(self) -> dict[str, Any]:
        """The stored projection as the Gatekeeper resolves paths in it (empty if none)."""
        projection = self.invocation.projection
        return projection.model_dump(mode="json") if projection is not None else {}

    @property
    def tool(self) -> str:
        """Tool name."""
        return self.invocation.tool_name

    @property
    def call_id(self) -> str:
        """tool_call_id."""
        return self.invocation.tool_call_id

    @property
    def ready(self) -> bool:
        """READY with a projection."""
        return (self.invocation.status is LifecycleStatus.READY
                and self.invocation.projection is not None)

    @property
    def found(self) -> bool:
        """READY with EVIDENCE_FOUND."""
        return self.ready and self.invocation.evidence_status is EvidenceStatus.EVIDENCE_FOUND

    @property
    def empty(self) -> bool:
        """READY with NO_EVIDENCE."""
        return self.ready and self.invocation.evidence_status is EvidenceStatus.NO_EVIDENCE

    @property
    def scope(self) -> QueryScope:
        """The recorded scope (empty for calls without a projection)."""
        projection = self.invocation.projection
        return projection.scope if projection is not None else QueryScope()

    @property
    def service(self) -> str | None:
        """The service the call was limited to."""
        return self.scope.service

    def argument(self, name: str) -> Any:
        """An argument as called."""
        return self.invocation.arguments.get(name)

    def items(self, key: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(path, element) for each object in the list at `$.key`."""
        values = self.document.get(key)
        if isinstance(values, list):
            for index, value in enumerate(values):
                if isinstance(value, dict):
                    yield f"$.{key}[{index}]", value


@dataclass(frozen=True)
class Element:
    """One element of a projected list, with its path."""

    call: CallView
    path: str
    data: dict[str, Any]

    def at(self, name: str) -> str:
        """The path of one of its fields."""
        return f"{self.path}.{name}"

    def text(self, name: str) -> str:
        """A field as text ('' when absent)."""
        value = self.data.get(name)
        return value if isinstance(value, str) else ""

    def number(self, name: str) -> float:
        """A numeric field (0 when absent)."""
        value = self.data.get(name)
        return float(value) if isinstance(value, int | float) else 0.0

    def time(self, name: str) -> datetime | None:
        """A timestamp field."""
        return parse_time(self.data.get(name))


@dataclass(frozen=True)
class LogPattern(Element):
    """A `search_logs` top message."""

    @property
    def service(self) -> str:
        """Service that logged it."""
        return self.text("service")

    @property
    def rank(self) -> int:
        """Level rank (DEBUG 0 ... FATAL 4)."""
        return LEVEL_RANK.get(self.text("level"), 0)

    @property
    def count(self) -> int:
        """Lines in the window."""
        return int(self.number("count"))

    @property
    def untrusted(self) -> bool:
        """Its text reads as instructions to an agent: what someone made a service log, never a
        finding about the service."""
        return any(isinstance(v, str) and instruction_like(v) for v in self.data.values())

    @property
    def is_new(self) -> bool:
        """A burst: at least 5 lines and at least 4 times the preceding window's count."""
        return self.count >= 5 and self.count >= 4 * (self.number("previous_count") + 1)


@dataclass(frozen=True)
class MetricView(Element):
    """A `query_metrics` series."""

    @property
    def shifted(self) -> bool:
        """It left its baseline band, up or down."""
        return self.text("shift") in ("up", "down")


def log_patterns(call: CallView) -> list[LogPattern]:
    """The top messages of a search_logs call."""
    return [LogPattern(call, path, data) for path, data in call.items("top_messages")]


def metric_series(call: CallView) -> list[MetricView]:
    """The series of a query_metrics call."""
    return [MetricView(call, path, data) for path, data in call.items("series")]
