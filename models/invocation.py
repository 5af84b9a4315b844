"""Tool invocations: identity, lifecycle, evidence status and the bounded projection."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from models.common import Contract

TOOL_CALL_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
"""The shape of an Anthropic `tool_use` id; offline agents mint ids of the same shape."""


class LifecycleStatus(StrEnum):
    """Invocation lifecycle: PROJECTING until the projection is stored, then READY or ERROR."""

    PROJECTING = "PROJECTING"
    READY = "READY"
    ERROR = "ERROR"


class EvidenceStatus(StrEnum):
    """What the call found, independent of its lifecycle."""

    EVIDENCE_FOUND = "EVIDENCE_FOUND"
    NO_EVIDENCE = "NO_EVIDENCE"
    ERROR = "ERROR"


class TimeWindow(Contract):
    """A closed time window in ISO 8601."""

    start: str = Field(description="Window start, ISO 8601.")
    end: str = Field(description="Window end, ISO 8601.")


class QueryScope(Contract):
    """What a tool call looked at; a negative observation is bounded by it."""

    service: str | None = Field(default=None, description="Service the query was limited to.")
    window: TimeWindow | None = Field(default=None, description="Time window queried.")
    filter: str | None = Field(default=None, description="Filter or search expression used.")
    queries: list[str] | None = Field(
        default=None,
        description="The exact backend queries run (PromQL or LogQL text, an API path with its "
        "parameters), so a reader can run them again; None for in-memory sources.")
    note: str | None = Field(
        default=None, max_length=2000,
        description="How the backend matched the service: under another label than the "
        "configured one, or not at all (then naming the services it has); None when as asked.")

    @model_serializer(mode="wrap")
    def _without_absent_queries(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out rather than null: scopes of in-memory sources keep their bytes (and hashes).
        data: dict[str, Any] = handler(self)
        for key in ("queries", "note"):
            if not data.get(key):
                data.pop(key, None)
        return data


class Projection(BaseModel):
    """The bounded, stored view of one tool result. Claims bind to paths inside it.

    Tool-specific result keys (`hits`, `series`, `alerts` ...) sit beside the reserved keys below.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    scope: QueryScope = Field(description="The query scope; NO_EVIDENCE claims bind here.")
    truncated: bool = Field(default=False, description="True when items or bytes were cut.")
    total_items: int | None = Field(default=None, description="Items before bounding, if known.")


class ToolInvocation(Contract):
    """One tool call of a run, identified by its tool_call_id (unique per run)."""

    tool_call_id: str = Field(pattern=TOOL_CALL_ID_PATTERN, description="The tool_use id.")
    tool_name: str = Field(min_length=1, description="Registered tool name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments as called.")
    status: LifecycleStatus = Field(description="Lifecycle status.")
    evidence_status: EvidenceStatus | None = Field(
        default=None, description="Evidence status; None while PROJECTING."
    )
    projection: Projection | None = Field(default=None, description="Stored bounded projection.")
    error: str | None = Field(default=None, description="Clean error message when status=ERROR.")
