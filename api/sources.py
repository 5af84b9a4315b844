"""What a run's `source` names, and what `GET /sources` lists.

A source is a name: one the sources file configures (`prod`), or a shipped scenario
(`scenario:NAME`, or its bare name when no configured source has it). Never a path: the web
app does not choose files on the workers' disks.
"""

from __future__ import annotations

from typing import Any

from api.schemas import SourceInfo
from pipeline.errors import InputError
from pipeline.scenarios import list_scenarios
from pipeline.sources.registry import is_path, sources
from pipeline.sources.scenario import SCENARIO_PREFIX


def list_sources() -> list[SourceInfo]:
    """The configured sources (their backends' kinds, not their addresses), then the shipped
    scenarios as `scenario:NAME`."""
    registry = sources()
    out = [SourceInfo(name=info.name, kind=info.kind, title=info.description or None,
                      backends=[kind for kind, _ in info.backends])
           for info in registry.describe() if not info.name.startswith(SCENARIO_PREFIX)]
    out += [SourceInfo(name=f"{SCENARIO_PREFIX}{info.name}", kind="scenario", title=info.title,
                       question=info.question, service=info.service)
            for info in list_scenarios(registry.scenarios_dir) if info.error is None]
    return out


def source_name(source: str) -> str:
    """The name to submit: `source` as given, a bare shipped scenario's name prefixed;
    InputError (one line) for a path."""
    name = source.strip()
    if is_path(name.split("@", 1)[0]):
        raise InputError(f"source {source[:80]!r} is a path: name a source GET /sources lists")
    registry = sources()
    if name in registry.config().sources or name.startswith(SCENARIO_PREFIX) or "@" in name:
        return name
    shipped = {info.name for info in list_scenarios(registry.scenarios_dir)}
    return f"{SCENARIO_PREFIX}{name}" if name in shipped else name


def document_sources(document: dict[str, Any]) -> None:
    """Name the sources in the OpenAPI document: `CreateRun.source` is one of `GET /sources`'
    names (a client, or a schema-driven test, can tell a valid source from the schema)."""
    schemas = document.get("components", {}).get("schemas", {})
    field = schemas.get("CreateRun", {}).get("properties", {}).get("source")
    if field is not None:
        field["enum"] = [info.name for info in list_sources()]
