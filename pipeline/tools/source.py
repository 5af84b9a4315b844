"""What tools return (`ToolOutput`), their argument bases and time windows.

Tools read a `pipeline.data.source.DataSource`: a scenario folder or configured backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from models.invocation import QueryScope, TimeWindow
from pipeline.data.records import Timestamp, iso

DEFAULT_LOOKBACK_MINUTES = 120
"""Without a window, tools look at the two hours before the source's `now`."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result: result keys for the projection, the scope it covered, and whether it
    found evidence (a successful query with zero matches has `found=False`)."""

    result: dict[str, Any]
    scope: QueryScope
    found: bool


class ArgsModel(BaseModel):
    """Base of tool argument models: unknown arguments are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class WindowArg(ArgsModel):
    """An explicit time window."""

    start: Timestamp = Field(description="Window start, ISO 8601.")
    end: Timestamp = Field(description="Window end, ISO 8601.")

    @model_validator(mode="after")
    def _ordered(self) -> WindowArg:
        if self.end <= self.start:
            raise ValueError("window end must be after its start")
        return self


class WindowedArgs(ArgsModel):
    """Arguments shared by tools over a time window."""

    window: WindowArg | None = Field(
        default=None, description="Time window; default the lookback before the incident's now."
    )
    lookback_minutes: int | None = Field(
        default=None, ge=1, le=7 * 24 * 60,
        description="Without a window: minutes before now to look at (default 120).",
    )

    @model_validator(mode="after")
    def _one_window(self) -> WindowedArgs:
        if self.window is not None and self.lookback_minutes is not None:
            raise ValueError("give either window or lookback_minutes, not both")
        return self

    def resolve(self, now: datetime) -> tuple[datetime, datetime]:
        """The window to query: explicit, else `lookback_minutes` (default 120) before now."""
        if self.window is not None:
            return self.window.start, self.window.end
        minutes = self.lookback_minutes or DEFAULT_LOOKBACK_MINUTES
        return now - timedelta(minutes=minutes), now


def time_window(start: datetime, end: datetime) -> TimeWindow:
    """The scope's window in canonical text."""
    return TimeWindow(start=iso(start), end=iso(end))


def minutes(span: timedelta) -> int:
    """A span in whole minutes."""
    return int(span.total_seconds() // 60)
