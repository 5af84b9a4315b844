"""Celery settings, read from the environment (VERITY_*) and the run's graph (its queues).

Without VERITY_BROKER_URL the embedded default applies: an in-process worker on `memory://`
with the `cache+memory://` result backend.
"""

from __future__ import annotations

import os

from pipeline.run.graph import BATCH_QUEUE, GRAPH, TOOL_QUEUE

broker_url = os.environ.get("VERITY_BROKER_URL", "memory://")
# Chords count their parts in the result backend: it must be shared by every worker.
result_backend = os.environ.get("VERITY_RESULT_BACKEND") or (
    broker_url if broker_url.startswith(("redis://", "rediss://")) else "cache+memory://"
)
task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
worker_send_task_events = True
# Every thread that dispatches a node or a tool chord borrows a producer (a broker connection)
# from this pool; Celery's default of 10 makes a worker of a hundred threads queue for them.
broker_pool_limit = int(os.environ.get("VERITY_BROKER_POOL_LIMIT", "128"))
task_send_sent_event = True
# Publishes the task events its threads buffered a few times a second (tasks/events.py).
worker_consumer = "tasks.events:Consumer"
# Run state lives in the database; a STARTED result per task would be a wasted write.
task_track_started = False
task_default_queue = "control"
# Each node's queue is declared once, in the graph (`NodeSpec.queue`); routes follow from it.
task_routes = {
    "verity.node.tool": {"queue": TOOL_QUEUE},
    **{f"verity.node.{spec.node}": {"queue": spec.queue} for spec in GRAPH.nodes.values()},
    "verity.batch.*": {"queue": BATCH_QUEUE},
    "verity.*": {"queue": "control"},
}
result_expires = 3600
# A publish that cannot reach the broker fails in about a second (a producer's submit says so at
# once, a worker's dispatch leaves the run to the reconciler) instead of retrying at length.
broker_connection_timeout = 4
task_publish_retry_policy = {
    "max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5,
}
# The reconciler (tasks/reconcile.py), sent by beat: `verity worker --beat` embeds it.
_reconcile_interval_s = float(os.environ.get("VERITY_RECONCILE_INTERVAL_S", "15"))
beat_schedule = {
    "verity-reconcile": {
        "task": "verity.reconcile.sweep",
        "schedule": _reconcile_interval_s,
        # a sweep still queued when the next one is due is superseded by it
        "options": {"expires": max(1.0, _reconcile_interval_s)},
    },
}
timezone = "UTC"
enable_utc = True
# The memory transport polls every second by default; every hop would wait for it.
if broker_url.startswith("memory"):
    broker_transport_options = {"polling_interval": 0.01}
else:
    # A message of a worker that died unacked is redelivered after this many seconds; it must
    # exceed the longest node (a model call with its retries).
    _visibility_timeout = int(os.environ.get("VERITY_VISIBILITY_TIMEOUT", "600"))
    broker_transport_options = {
        "visibility_timeout": _visibility_timeout,
        # Sweep for abandoned messages often enough to honour the timeout (kombu's default
        # sweep runs about every 100 s).
        "unacked_restore_interval": max(1, min(10, _visibility_timeout // 3)),
        "unacked_restore_throttle": 1,
    }
