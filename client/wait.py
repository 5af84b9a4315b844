"""Waiting for a run to end, the same for the in-process and the HTTP client."""

from __future__ import annotations

import time
from collections.abc import Callable

from models.run import RunRecord
from pipeline.errors import RunTimeoutError

__all__ = ["RunTimeoutError", "wait_for_end"]


def wait_for_end(get: Callable[[str], RunRecord], run_id: str, *, timeout: float,
                 poll: float) -> RunRecord:
    """Read the run with `get` every `poll` s until it is terminal; RunTimeoutError after
    `timeout` seconds (the local and the HTTP client both wait so)."""
    deadline = time.monotonic() + timeout
    while True:
        record = get(run_id)
        if record.status.terminal:
            return record
        if time.monotonic() > deadline:
            raise RunTimeoutError(f"run {run_id} still {record.status.value} after {timeout}s")
        time.sleep(poll)
