"""Building a Runtime from settings: the store, the tool registry, the agents, the data source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.agents.investigator import OfflineExecutor
from pipeline.agents.knowledge import OfflineKnowledgeAnswerer, validate_knowledge_answer
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.planner import OfflinePlanner, classify_intent
from pipeline.agents.template_composer import TemplateComposer
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.errors import InputError
from pipeline.runtime import Agents, Runtime
from pipeline.scenarios import default_scenarios_dir, load_scenario
from pipeline.store import RunStore
from pipeline.tools.registry import default_registry


def offline_agents() -> Agents:
    """The deterministic agents used without an API key."""
    return Agents(
        planner=OfflinePlanner(),
        executor=OfflineExecutor(),
        verifier=OfflineVerifier(),
        composer=TemplateComposer(),
        knowledge=OfflineKnowledgeAnswerer(),
        classify_intent=classify_intent,
        validate_knowledge=validate_knowledge_answer,
    )


def load_source(data_source: str | None) -> Any:
    """The incident data a run's tools query: a scenario folder."""
    if data_source is None:
        raise InputError("this run has no data source (pass --scenario or --scenario-dir)")
    return load_scenario(Path(data_source))


def resolve_scenario(name: str | None, directory: str | None) -> str:
    """A scenario folder from `--scenario NAME` or `--scenario-dir PATH`, as an absolute path."""
    if directory:
        path = Path(directory).expanduser().resolve()
    else:
        path = (default_scenarios_dir() / (name or "")).resolve()
    if not name and not directory:
        raise InputError("name a scenario with --scenario NAME or --scenario-dir PATH")
    if not (path / "scenario.json").is_file():
        raise InputError(f"no scenario at {path} (expected {path / 'scenario.json'})")
    load_scenario(path)  # fail now, with its own one-line message, if it is broken
    return str(path)


def build_runtime(
    settings: VeritySettings | None = None, *, store: RunStore | None = None
) -> Runtime:
    """A Runtime over the configured database with the offline agents."""
    settings = settings or VeritySettings()
    return Runtime(
        store=store or RunStore.open(resolve_database_url(settings)),
        registry=default_registry(),
        agents=offline_agents(),
        settings=settings,
        source_loader=load_source,
    )
