"""Test helpers that put rows into a store, and read rows back, through its public API.

The store has no "append one event" or "record one attempt" method: production writes them
with a node's commit (`commit_node`). These helpers do the same, one commit per call, so a
test states what it stores without a node's state machine around it. Reading a batch's model
attempts (which only a report needs) goes to the database through the store's engine.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from models.invocation import ToolInvocation
from models.run import LlmAttempt, RunEvent
from models.tables import LlmAttemptRow
from pipeline.errors import StaleStateError
from pipeline.store import RunStore

NODE = "test"
"""The node name of the commits these helpers make."""


def _commit(store: RunStore, run_id: str, **parts: Any) -> int:
    """One node commit at the run's current version; retried when another commit won the
    race for that version (RunNotFoundError if there is no such run). The new version."""
    while True:
        head, state, _ = store.get_head(run_id)
        try:
            return store.commit_node(run_id, expected_version=head.version,
                                     node=head.node or NODE, state=state, **parts)
        except StaleStateError:
            continue


def add_invocation(store: RunStore, run_id: str, invocation: ToolInvocation, *,
                   turn: int = 0) -> None:
    """Record a tool call as a node's commit does."""
    _commit(store, run_id, invocations=[invocation], turn=turn)


def append_event(store: RunStore, run_id: str, *, node: str, kind: str,
                 payload: dict[str, Any] | None = None) -> RunEvent:
    """Append one event as a node's commit does; the event as stored."""
    head, _, _ = store.get_head(run_id)
    _commit(store, run_id, events=[(node, kind, payload or {})])
    mine = [e for e in store.events_since(run_id, tenant_id=head.tenant_id)
            if (e.node, e.kind, e.payload) == (node, kind, payload or {})]
    return mine[-1]


def record_attempt(store: RunStore, attempt: LlmAttempt) -> None:
    """Record one model attempt as a node's commit does."""
    _commit(store, attempt.run_id, attempts=[attempt])


def set_executor_output(store: RunStore, run_id: str, raw: str) -> None:
    """Keep the Executor's raw output as the execute node's commit does."""
    _commit(store, run_id, executor_output_raw=raw)


def executor_output(store: RunStore, run_id: str) -> str | None:
    """The stored raw Executor output, as a node reads it."""
    return store.get_head(run_id, with_executor_output=True)[2]


def batch_attempts(store: RunStore, batch_id: str) -> list[LlmAttempt]:
    """The model attempts a re-verification batch made, in order."""
    stmt = (select(LlmAttemptRow).where(LlmAttemptRow.batch_id == batch_id)
            .order_by(LlmAttemptRow.id))
    with store.engine.connect() as connection:
        rows = connection.execute(stmt).mappings().all()
    return [LlmAttempt.model_validate({name: row[name] for name in LlmAttempt.model_fields})
            for row in rows]
