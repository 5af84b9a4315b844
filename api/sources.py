"""What a run's `source` names, and what `GET /sources` lists.

For now a source is a shipped scenario: `scenario:NAME`, or its bare name. `data_source_of` is
the one place that turns a source into what `VerityClient.submit` takes, so named sources
(another change) replace it alone.
"""

from __future__ import annotations

import re
from typing import Any

from api.schemas import SourceInfo
from pipeline.errors import InputError
from pipeline.factory import resolve_scenario
from pipeline.scenarios import default_scenarios_dir, list_scenarios

SCENARIO_PREFIX = "scenario:"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def list_sources() -> list[SourceInfo]:
    """The shipped scenarios, as `scenario:NAME`."""
    return [SourceInfo(name=f"{SCENARIO_PREFIX}{info.name}", kind="scenario", title=info.title,
                       question=info.question, service=info.service)
            for info in list_scenarios(default_scenarios_dir()) if info.error is None]


def data_source_of(source: str) -> str:
    """The `data_source` of a source: a shipped scenario's folder; InputError (one line) for a
    source that is not one, never a path of the caller's choosing."""
    name = source.removeprefix(SCENARIO_PREFIX)
    folders = {info.name: info.path for info in list_scenarios(default_scenarios_dir())
               if info.error is None}
    if not _NAME.fullmatch(name) or name not in folders:
        raise InputError(f"unknown source {source[:80]!r}: GET /sources lists them")
    return resolve_scenario(None, folders[name])


def document_sources(document: dict[str, Any]) -> None:
    """Name the sources in the OpenAPI document: `CreateRun.source` is one of `GET /sources`'
    names (a client, or a schema-driven test, can tell a valid source from the schema)."""
    schemas = document.get("components", {}).get("schemas", {})
    field = schemas.get("CreateRun", {}).get("properties", {}).get("source")
    if field is not None:
        field["enum"] = [info.name for info in list_sources()]
