"""The runtime a worker process uses: built once from the environment, or set by the caller."""

from __future__ import annotations

import threading

from pipeline.factory import build_runtime
from pipeline.runtime import Runtime

_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    """The process's runtime, built from VERITY_* settings on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime()
        return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    """Use this runtime (the embedded worker shares the CLI's), or None to rebuild lazily."""
    global _runtime
    with _lock:
        _runtime = runtime
