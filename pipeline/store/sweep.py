"""The reconciler's statements: stalled runs, conditional claims, deadline and invalid-state
failures, and removing a run that never started.

Every action is a conditional update on the run row (`WHERE version = ? AND updated_at = ?`,
not terminal) that also reserves the seq of its `run_event`, so several reconcilers sweeping at
once never act twice on the same run state: the loser's update matches no row and writes
nothing. Each action runs in a transaction of its own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import Connection

from models.common import RunStatus
from models.state import NextStep
from models.tables import DiagnosisRunRow
from pipeline.store import convert
from pipeline.store.engine import TERMINAL
from pipeline.store.rows import utc_now, write_events

RUN = DiagnosisRunRow
DEFAULT_RUN_DEADLINE_S = 3600.0
"""A run's deadline when none is given (VERITY_RUN_DEADLINE_S's default)."""

NODE = "reconcile"
"""The node name of every reconciler event."""

DEADLINE_EXCEEDED = "RUN_DEADLINE_EXCEEDED"
STATE_INVALID = "RUN_STATE_INVALID"

_ACTIVE = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


def _lease_free(now: datetime) -> Any:
    return or_(RUN.lease_expires_at.is_(None), RUN.lease_expires_at < now)


def select_stalled(*, before: datetime, now: datetime, limit: int) -> Any:
    """PENDING or RUNNING runs last changed before `before` with no live lease at `now`,
    oldest first, with their stored next step (only that part of the state is read)."""
    return (
        select(RUN.run_id, RUN.status, RUN.version, RUN.updated_at, RUN.cancel_requested,
               RUN.reconcile_count, RUN.state["next"].label("next"))
        .where(RUN.status.in_(_ACTIVE), RUN.updated_at < before, _lease_free(now))
        .order_by(RUN.updated_at, RUN.run_id)
        .limit(limit)
    )




def claim(connection: Connection, run_id: str, *, version: int, updated_at: datetime,
          step: NextStep | None) -> bool:
    """Touch a stalled run if it is still exactly as found, with a reconcile/resent event."""
    now = utc_now()
    stmt = (
        update(RUN)
        .where(RUN.run_id == run_id, RUN.version == version, RUN.updated_at == updated_at,
               RUN.status.in_(_ACTIVE), _lease_free(now))
        .values(updated_at=now, reconcile_count=RUN.reconcile_count + 1,
                event_seq=RUN.event_seq + 1)
        .returning(RUN.event_seq, RUN.state["next"])
    )
    row = connection.execute(stmt).one_or_none()
    if row is None:
        return False
    if step is None:
        step = convert.next_step(row[1])
    payload = {"node": step.node if step else None, "version": version,
               "tool_call_ids": list(step.tool_call_ids) if step else []}
    write_events(connection, run_id, [(NODE, "resent", payload)], last_seq=int(row[0]))
    return True




def select_overdue(*, now: datetime, limit: int) -> Any:
    """Non-terminal runs past their deadline, the most overdue first."""
    return (
        select(RUN.run_id, RUN.version, RUN.created_at, RUN.deadline_at)
        .where(RUN.status.not_in(TERMINAL), RUN.deadline_at.is_not(None),
               RUN.deadline_at < now)
        .order_by(RUN.deadline_at, RUN.run_id)
        .limit(limit)
    )


def deadline_message(created_at: datetime, deadline_at: datetime) -> str:
    """`run deadline of N s exceeded`, N the run's own deadline in seconds."""
    seconds = (deadline_at - created_at).total_seconds()
    return f"run deadline of {seconds:g} s exceeded"


def fail(connection: Connection, run_id: str, *, version: int, reason: str, error: str) -> bool:
    """End a non-terminal run at `version` FAILED with a reconcile/failed event; its lease is
    cleared. False, and nothing written, if the run moved on or ended meanwhile."""
    now = utc_now()
    stmt = (
        update(RUN)
        .where(RUN.run_id == run_id, RUN.version == version, RUN.status.not_in(TERMINAL))
        .values(status=RunStatus.FAILED.value, version=RUN.version + 1, updated_at=now,
                finished_at=now, lease_owner=None, lease_expires_at=None,
                event_seq=RUN.event_seq + 1)
        .returning(RUN.event_seq)
    )
    seq = connection.execute(stmt).scalar_one_or_none()
    if seq is None:
        return False
    write_events(connection, run_id, [(NODE, "failed", {"reason": reason, "error": error})],
                  last_seq=int(seq))
    return True


def delete_unstarted(run_id: str) -> Any:
    """Delete a run that never started (PENDING at version 0); its events go with it."""
    return delete(RUN).where(RUN.run_id == run_id, RUN.status == RunStatus.PENDING.value,
                             RUN.version == 0)


def stale_before(now: datetime, older_than_s: float) -> datetime:
    """The last-progress time a run must be older than to count as stalled."""
    return now - timedelta(seconds=older_than_s)
