"""The runtime a worker process uses: built once from the environment, or set by the caller."""

from __future__ import annotations

import importlib
import threading
from typing import cast

from pipeline.config import VeritySettings
from pipeline.errors import ConfigurationError
from pipeline.factory import build_runtime
from pipeline.run.runtime import Runtime

_lock = threading.Lock()
_runtime: Runtime | None = None


def get_runtime() -> Runtime:
    """The process's runtime, built from VERITY_* settings on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = runtime_from(VeritySettings())
        return _runtime


def runtime_from(settings: VeritySettings) -> Runtime:
    """The runtime the settings describe: VERITY_RUNTIME_FACTORY's when it is set (a test
    double, another agent set), else `build_runtime`'s."""
    if not settings.runtime_factory:
        return build_runtime(settings)
    module, _, name = settings.runtime_factory.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"VERITY_RUNTIME_FACTORY {settings.runtime_factory!r} cannot be loaded: {exc}"
        ) from None
    return cast(Runtime, factory(settings))


def set_runtime(runtime: Runtime | None) -> None:
    """Use this runtime (the embedded worker shares the CLI's), or None to rebuild lazily."""
    global _runtime
    with _lock:
        _runtime = runtime
