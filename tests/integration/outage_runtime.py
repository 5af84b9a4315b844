"""A worker runtime whose database "is down" for the verify node until a wall-clock time: the
task must retry within its budget, give up past it, and leave the run to the reconciler.

Loaded by workers through VERITY_RUNTIME_FACTORY=tests.integration.outage_runtime:build, with
VERITY_TEST_OUTAGE_S set to the outage's length, counted from verify's first try (so a slow
start of the worker or the producer cannot shorten it below the retry budget).
"""

from __future__ import annotations

import os
import time

from pipeline.config import VeritySettings
from pipeline.errors import StoreUnavailableError
from pipeline.factory import build_runtime
from pipeline.run.runtime import NodeOutcome, Runtime


def build(settings: VeritySettings) -> Runtime:
    """The offline runtime, with verify refused by a database that is down until the end."""
    runtime = build_runtime(settings)
    length = float(os.environ["VERITY_TEST_OUTAGE_S"])
    started: list[float] = []
    run_node = runtime.run_node

    def refusing(run_id: str, node: str, version: int) -> NodeOutcome:
        if node == "verify" and not started:
            started.append(time.monotonic())
        if node == "verify" and time.monotonic() < started[0] + length:
            raise StoreUnavailableError("database unavailable: connection refused (simulated)")
        return run_node(run_id, node, version)

    runtime.run_node = refusing  # type: ignore[method-assign]
    return runtime
