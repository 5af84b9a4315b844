"""The embedded default: an in-process worker thread on `memory://`, no service to start."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from celery.worker import WorkController
from pipeline.run.graph import WORKER_QUEUES
from pipeline.run.runtime import Runtime

from tasks.app import app
from tasks.services import set_runtime


@contextmanager
def embedded_worker(
    runtime: Runtime, *, concurrency: int = 4, join_timeout: float = 5.0
) -> Iterator[WorkController]:
    """Run a threads-pool worker consuming every queue for the duration of the block.

    On exit the worker is stopped; its thread is a daemon, so a caller about to exit can pass
    a small `join_timeout` instead of waiting out the consumer's polling loop.
    """
    if not app.conf.broker_url.startswith("memory"):
        raise RuntimeError("the embedded worker runs only on the memory:// transport")
    set_runtime(runtime)
    worker = WorkController(
        app=app, concurrency=concurrency, pool="threads", queues=list(WORKER_QUEUES),
        loglevel="WARNING", without_heartbeat=True, without_mingle=True, without_gossip=True,
        hostname="verity-embedded@localhost",
    )
    thread = threading.Thread(target=worker.start, name="verity-embedded-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop(in_sighandler=False)
        thread.join(join_timeout)
        set_runtime(None)
