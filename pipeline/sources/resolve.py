"""Which source a new run stores, decided before anything is written: the producer's `source`
(or the older `data_source`, a scenario folder) checked and pinned, else the sources file's
`default_source`.

    resolve_source("prod", at=moment, loader=load_source)          -> "prod@2026-12-01T17:00:00Z"
    resolve_source(None, data_source="/srv/scenarios/x", loader=load_source) -> "/srv/scenarios/x"
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pipeline.errors import InputError
from pipeline.sources.registry import load_source, resolve_scenario, sources


def resolve_source(source: str | None, *, data_source: str | None = None,
                   at: datetime | None = None,
                   loader: Callable[[str | None], Any] = load_source) -> str | None:
    """The source to store, checked now (InputError, one line): a scenario folder as an
    absolute path, `scenario:NAME`, or a configured name (backends pinned at `at`, default
    now: `prod@2026-12-01T17:00:00Z`). A runtime with a source loader of its own
    (VERITY_RUNTIME_FACTORY) is asked to load it instead."""
    if source is not None and data_source is not None:
        raise InputError("give submit a source or a data_source, not both")
    if loader is not load_source:
        return _custom_source(source if source is not None else data_source, loader)
    registry = sources()
    if source is not None and source.strip():
        return registry.reference(source, at=at)
    if data_source is not None and data_source.strip():
        folder = resolve_scenario(None, str(data_source))
        return folder if at is None else registry.reference(folder, at=at)
    default = registry.default_reference(at=at)
    if default is None:
        raise InputError("submit needs a data_source (a scenario folder) or a source (a "
                         "configured name or scenario:NAME)")
    return default


def _custom_source(source: str | None, loader: Callable[[str | None], Any]) -> str | None:
    try:
        loader(source)
    except InputError:
        raise
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise InputError(f"data_source {source!r} cannot be loaded: {message}") from None
    return source
