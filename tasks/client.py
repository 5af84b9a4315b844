"""The producer API for the web app: submit, get, wait, cancel, events since a sequence number.

    client = VerityClient.from_env()            # VERITY_BROKER_URL, VERITY_DATABASE_URL
    run_id = client.submit("Why is checkout-service returning 500s?",
                           data_source="/srv/verity/scenarios/checkout-500s")
    for event in client.events(run_id, after=0): ...
    record = client.wait(run_id, timeout=60)
    client.cancel(run_id)

Or, without this module, enqueue by name: `app.send_task("verity.run.coordinate", (run_id, 0))`
after creating the run with `Runtime.submit`.
"""

from __future__ import annotations

import time

from models.run import RunEvent, RunRecord
from models.state import RuntimeState
from pipeline.errors import VerityError
from pipeline.routing import Node
from pipeline.runtime import Runtime

from tasks.app import app
from tasks.nodes import coordinate, pending_task_ids
from tasks.services import get_runtime


class RunTimeoutError(VerityError):
    """`wait` ran out of time; the run goes on."""


class VerityClient:
    """Enqueue runs and read them back; state comes from the store, never from results."""

    def __init__(self, runtime: Runtime) -> None:
        """Use this runtime's store and agents (submit routes the intent with them)."""
        self.runtime = runtime

    @classmethod
    def from_env(cls) -> VerityClient:
        """A client over the VERITY_* configured database and broker."""
        return cls(get_runtime())

    def submit(
        self, query: str, *, session_id: str | None = None, data_source: str | None = None
    ) -> str:
        """Create the run and enqueue its coordinator; returns the run id at once."""
        run_id = self.runtime.submit(query, session_id=session_id, data_source=data_source)
        # A new run starts at plan: naming the node spares the coordinator a read.
        coordinate.apply_async((run_id, 0, Node.PLAN.value), task_id=f"{run_id}-coordinate-0")
        return run_id

    def get(self, run_id: str) -> RunRecord:
        """The run as stored now."""
        return self.runtime.store.get_run(run_id)

    def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        """The run's orchestration events with seq > after."""
        return self.runtime.store.events_since(run_id, after)

    def wait(self, run_id: str, *, timeout: float = 120.0, poll: float = 0.05) -> RunRecord:
        """Block until the run is terminal; RunTimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.get(run_id)
            if record.status.terminal:
                return record
            if time.monotonic() > deadline:
                raise RunTimeoutError(f"run {run_id} still {record.status.value} after {timeout}s")
            time.sleep(poll)

    def cancel(self, run_id: str) -> bool:
        """Cancel: no new node or tool starts, late results are discarded, queued tasks are
        revoked (never terminated). False if the run had already ended."""
        record, raw = self.runtime.store.get_state(run_id)
        cancelled = self.runtime.cancel(run_id)
        if raw is not None:
            step = RuntimeState.model_validate(raw).next
            ids = pending_task_ids(run_id, record.version, step)
            if ids:
                app.control.revoke(ids)
        return cancelled

