"""One thin task per node, the tool task and the coordinator; all logic is in pipeline/run/runtime.

Messages carry a run id and a version (and a tool_call_id for tools), never state. Task ids are
deterministic (`<run>-<node>-<version>`), so a cancel can revoke what is queued. Node results
are not stored (the state is in the database); tool results are only where the chord joins
stored results (see `_tool_results_stored`).
"""

from __future__ import annotations

import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

from celery import Task, chord
from celery.backends.redis import RedisBackend
from models.state import NextStep
from pipeline.config import VeritySettings
from pipeline.errors import StoreUnavailableError
from pipeline.run.runtime import NODE_NAMES, NodeOutcome

from tasks.app import app
from tasks.services import get_runtime

logger = logging.getLogger(__name__)

FIRST_TRY_HEADER = "verity_first_try"
"""Message header: when (epoch seconds) the message was first tried, carried by its retries."""
RETRY_BACKOFF_S = 0.5
"""The first retry's delay; each next one doubles, up to `RETRY_BACKOFF_MAX_S`."""
RETRY_BACKOFF_MAX_S = 15.0

_clock = time.time
"""Wall-clock seconds (retries run in other processes than the first try); tests replace it."""


@cache
def retry_budget_s() -> float:
    """Seconds a message keeps retrying an unreachable database (VERITY_STORE_RETRY_BUDGET_S)."""
    return VeritySettings().store_retry_budget_s


def retry_delay(retries: int, *, remaining_s: float, rng: random.Random | None = None) -> float:
    """The wait before retry number `retries + 1`: capped exponential backoff with jitter (the
    upper half of the step, so many tasks hit by one outage do not come back in step), never
    past what is left of the budget."""
    step = min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2.0 ** min(retries, 32))
    jittered = (rng or random).uniform(step / 2, step)
    return max(0.0, min(jittered, remaining_s))


class StoreRetryingTask(Task):
    """A database that drops or refuses connections is waited out: the message is sent again
    with backoff while it is within `retry_budget_s()` of its first try (the time travels in the
    `verity_first_try` header); past it the task logs and gives up, and the reconciler finishes
    the run once the database is back. Nodes are idempotent, so a retry after a commit that did
    land only re-dispatches the stored next step."""

    max_retries = None  # bounded by time, not by count

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        started = _clock()
        try:
            return super().__call__(*args, **kwargs)
        except StoreUnavailableError as exc:
            return self._wait_out(exc, started=started)

    def _wait_out(self, exc: StoreUnavailableError, *, started: float) -> Any:
        request = self.request
        headers = dict(request.headers or {})
        first = float(headers.get(FIRST_TRY_HEADER, started))
        elapsed, budget = _clock() - first, retry_budget_s()
        if elapsed >= budget:
            logger.error("%s[%s]: %s; still unavailable %.0f s after the first try (budget "
                         "%.0f s): giving up, the reconciler will finish the run",
                         self.name, request.id, exc, elapsed, budget)
            raise exc
        delay = retry_delay(request.retries, remaining_s=budget - elapsed)
        raise self.retry(exc=exc, countdown=delay,
                         headers={**headers, FIRST_TRY_HEADER: first})


DELIVER_TASK = "verity.notify.deliver"
"""The task that makes one attempt of a notification delivery (tasks/notify.py)."""


def node_task_id(run_id: str, node: str, key: int | str) -> str:
    """The id of the message that runs `node` (a graph node, `coordinate` or `tool`) of the
    run: `key` is the version it runs at, or the tool call's id for `tool`."""
    return f"{run_id}-{node}-{key}"


def pending_task_ids(run_id: str, version: int, step: NextStep | None) -> list[str]:
    """Ids of the messages dispatched for `step` (to revoke them on cancel)."""
    if step is None:
        return []
    ids = [node_task_id(run_id, "tool", tool_call_id) for tool_call_id in step.tool_call_ids]
    ids.append(node_task_id(run_id, "coordinate", version))
    ids.append(node_task_id(run_id, step.node, version))
    return ids


def dispatch(run_id: str, outcome: NodeOutcome) -> None:
    """Send what `outcome` asks for: a node, or the tool chord whose body re-enters the
    coordinator."""
    if outcome.deliveries:
        _send_deliveries(outcome.deliveries)
    step = outcome.next
    if step is None or outcome.kind not in ("committed", "redispatch"):
        return
    if step.tool_call_ids:
        ignore_result = not _tool_results_stored()
        header = [
            tool.si(run_id, tool_call_id).set(
                task_id=node_task_id(run_id, "tool", tool_call_id),
                ignore_result=ignore_result)
            for tool_call_id in step.tool_call_ids
        ]
        body = coordinate.si(run_id, outcome.version, step.node).set(
            task_id=node_task_id(run_id, "coordinate", outcome.version)
        )
        chord(header)(body)
        return
    NODE_TASKS[step.node].apply_async(
        (run_id, outcome.version), task_id=node_task_id(run_id, step.node, outcome.version)
    )


def _send_deliveries(delivery_ids: tuple[str, ...]) -> None:
    """Publish the first attempt of each delivery the run's release enqueued; one that cannot
    be published now is the reconciler's (it is a PENDING row, due)."""
    for delivery_id in delivery_ids:
        try:  # by name: tasks.notify builds on this module
            app.send_task(DELIVER_TASK, (delivery_id,))
        except Exception:
            logger.warning("delivery %s not sent now; the reconciler will", delivery_id,
                           exc_info=True)


def _tool_results_stored() -> bool:
    """Whether a tool task stores its result: only where the chord joins stored results.

    The Redis backend counts a chord's parts and keeps their results in a sorted set of its
    own, so a stored result would be one more write and PUBLISH per tool that nobody reads;
    other backends (the embedded `cache+memory://`, a database) join the stored results.
    """
    return not isinstance(app.backend, RedisBackend)


_progress_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verity-progress")
"""Writes PROGRESS meta beside the node, off its critical path: the node's read, commit and
next message do not wait for the result backend."""


def _progress(task: Task, run_id: str, node: str) -> None:
    """PROGRESS meta for Flower and result readers: which run, which node (best effort)."""
    request = task.request
    if request.id and not request.called_directly:
        _progress_writer.submit(_write_progress, task.backend, request.id, request,
                                {"run_id": run_id, "node": node})


def _write_progress(backend: Any, task_id: str, request: Any, meta: dict[str, str]) -> None:
    try:
        backend.store_result(task_id, meta, "PROGRESS", request=request)
    except Exception:  # progress is telemetry: a failed write must not touch the run
        logger.warning("progress of task %s not recorded", task_id, exc_info=True)


@app.task(name="verity.run.coordinate", bind=True, ignore_result=True, base=StoreRetryingTask)
def coordinate(
    self: Task, run_id: str, version: int, node: str | None = None
) -> dict[str, Any]:
    """Entry point and chord body: dispatch `node` (or the run's stored next step)."""
    outcome = get_runtime().coordinate(run_id, version, node)
    dispatch(run_id, outcome)
    return {"run_id": run_id, "outcome": outcome.kind}


@app.task(name="verity.node.tool", bind=True, base=StoreRetryingTask)
def tool(self: Task, run_id: str, tool_call_id: str) -> dict[str, Any]:
    """Run one tool call; never raises (a failing tool is an ERROR invocation). Its result
    (run id, tool_call_id, status) goes to the chord and shows in Flower."""
    invocation = get_runtime().run_tool_call(run_id, tool_call_id)
    status = invocation.status.value if invocation else "skipped"
    return {"run_id": run_id, "tool_call_id": tool_call_id, "status": status}


def _make_node_task(node: str) -> Task:
    @app.task(name=f"verity.node.{node}", bind=True, ignore_result=True, base=StoreRetryingTask)
    def run(self: Task, run_id: str, version: int) -> dict[str, Any]:
        _progress(self, run_id, node)
        outcome = get_runtime().run_node(run_id, node, version)
        dispatch(run_id, outcome)
        return {"run_id": run_id, "node": node, "outcome": outcome.kind}

    run.__doc__ = f"Run the {node} node of a run at a version."
    return run


NODE_TASKS: dict[str, Task] = {node: _make_node_task(node) for node in NODE_NAMES}
