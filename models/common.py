"""Enumerations and the base model shared by every contract."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

MAX_INT32 = 2**31 - 1
"""The largest integer a stored column (PostgreSQL INTEGER) takes: a bound on every integer a
caller gives (a page size, a seq, a limit), so a larger one is refused where it enters."""


def _within_utc(value: datetime | None) -> datetime | None:
    # 9999-12-31T23:00-05:00 is a valid datetime whose UTC time is past year 9999: the store
    # compares in UTC, and would fail on it
    if value is not None and value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise ValueError("time out of range once in UTC (years 1 to 9999)") from None
    return value


UtcTime = Annotated[datetime, AfterValidator(_within_utc)]
"""A time that stays within years 1 to 9999 in UTC (the store's comparisons)."""


class Contract(BaseModel):
    """Base for every contract: unknown fields are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Verdict(StrEnum):
    """A Verifier verdict. Ordered: REJECT < LOW_CONFID < PASS."""

    PASS = "PASS"
    LOW_CONFID = "LOW_CONFID"
    REJECT = "REJECT"

    @property
    def rank(self) -> int:
        """Higher is more confident; used to cap one verdict by another."""
        return _VERDICT_RANK[self]


_VERDICT_RANK = {Verdict.REJECT: 0, Verdict.LOW_CONFID: 1, Verdict.PASS: 2}


class Intent(StrEnum):
    """What the user asked for."""

    DIAGNOSIS = "DIAGNOSIS"
    KNOWLEDGE_QUERY = "KNOWLEDGE_QUERY"


class RunStatus(StrEnum):
    """Where a diagnosis run stands. SUCCESS and FALLBACK are released outcomes."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FALLBACK = "FALLBACK"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        """True once the run can no longer change."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {RunStatus.SUCCESS, RunStatus.FALLBACK, RunStatus.FAILED, RunStatus.CANCELLED}
)


class FallbackType(StrEnum):
    """The three fixed safe-fallback types."""

    EVIDENCE_VALIDATION_FAILED = "EVIDENCE_VALIDATION_FAILED"
    SEMANTIC_UNSUPPORTED = "SEMANTIC_UNSUPPORTED"
    SEMANTIC_UNAVAILABLE = "SEMANTIC_UNAVAILABLE"
