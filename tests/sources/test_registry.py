"""The source registry: references, resolution, the composite over configured backends,
pinned time, caching per process and reloading when the sources file changes."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from models.agent import ToolCallRequest
from models.invocation import EvidenceStatus, LifecycleStatus
from pipeline.data.source import AlertQuery, ChangeQuery, EventQuery, LogQuery, MetricQuery
from pipeline.errors import ConfigurationError, InputError, SourceError, UnknownSourceError
from pipeline.scenarios import default_scenarios_dir, load_scenario
from pipeline.sources import composite as composite_module
from pipeline.sources.composite import ConfiguredSource
from pipeline.sources.registry import (
    SourceRef,
    SourceRegistry,
    load_source,
    parse_reference,
    sources,
)
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry, run_tool
from tests.sources.fakes import Made

CHECKOUT = default_scenarios_dir() / "checkout-pool-exhaustion"
AT = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
START, END = datetime(2026, 12, 1, 15, 0, tzinfo=UTC), AT
EVERY_BACKEND = ("prometheus", "alertmanager", "loki", "kubernetes")
CONFIG = f"""
[sources.prod]
description = "Production"
prometheus = {{ url = "http://prometheus:9090" }}
alertmanager = {{ url = "http://alertmanager:9093" }}
loki = {{ url = "http://loki:3100" }}
kubernetes = {{ url = "https://k8s:6443" }}
runbooks = {{ path = "runbooks" }}

[sources.metrics-only]
prometheus = {{ url = "http://prometheus:9090" }}

[sources.quiet]
prometheus = {{ url = "http://prometheus:9090", alerts = false }}

[sources.demo]
scenario = "checkout-pool-exhaustion"

[sources.local]
scenario = "incidents/mine"

[sources.pinned-folder]
scenario = "{CHECKOUT}"
"""


@pytest.fixture
def made() -> Made:
    return Made()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    file = tmp_path / "config.toml"
    file.write_text(CONFIG, encoding="utf-8")
    shutil.copytree(default_scenarios_dir() / "billing-no-evidence",
                    tmp_path / "incidents" / "mine")
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "db.md").write_text(
        "---\ndoc_id: RB-1\ntitle: Payment DB pool exhausted\n---\n1. Raise the pool size\n",
        encoding="utf-8")
    return file


@pytest.fixture
def registry(config_file: Path, made: Made) -> SourceRegistry:
    return SourceRegistry(path=config_file, explicit=True,
                          factories=made.factories(*EVERY_BACKEND))


# -- references ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("prod", SourceRef("prod"), id="name"),
    pytest.param("prod@2026-12-01T17:00:00Z", SourceRef("prod", AT), id="pinned-name"),
    pytest.param("prod@2026-12-01T18:00:00+01:00", SourceRef("prod", AT), id="offset-to-utc"),
    pytest.param("scenario:checkout@2026-12-01T17:00:00Z", SourceRef("scenario:checkout", AT),
                 id="pinned-scenario"),
    pytest.param("/srv/a@b/incident", SourceRef("/srv/a@b/incident"), id="folder-with-at"),
    pytest.param("/srv/x@2026-12-01T17:00:00Z", SourceRef("/srv/x", AT), id="pinned-folder"),
])
def test_reference__parsed(text: str, expected: SourceRef) -> None:
    assert parse_reference(text) == expected


def test_reference__a_name_with_a_time_that_is_not_one_is_input_error() -> None:
    with pytest.raises(InputError, match="'yesterday' is not an ISO 8601 time"):
        parse_reference("prod@yesterday")


def test_reference__backends_are_pinned_at_submit_and_scenarios_only_when_asked(
    registry: SourceRegistry,
) -> None:
    assert registry.reference("prod", now=AT) == "prod@2026-12-01T17:00:00Z"
    assert registry.reference("prod", at=datetime(2026, 11, 2, 3, 4, 5, 600)) == \
        "prod@2026-11-02T03:04:05Z"  # naive read as UTC, whole seconds
    assert registry.reference("demo") == "demo"
    assert registry.reference("scenario:checkout-pool-exhaustion") == \
        "scenario:checkout-pool-exhaustion"
    assert registry.reference("scenario:checkout-pool-exhaustion", at=AT) == \
        "scenario:checkout-pool-exhaustion@2026-12-01T17:00:00Z"
    assert registry.reference(str(CHECKOUT)) == str(CHECKOUT.resolve())
    assert registry.reference("prod@2026-12-01T17:00:00Z", at=AT) == "prod@2026-12-01T17:00:00Z"
    with pytest.raises(InputError, match="names a time and so does at="):
        registry.reference("prod@2026-12-01T17:00:00Z", at=START)


@pytest.mark.parametrize(("name", "known"), [
    pytest.param("nope", "(known: prod, metrics-only, quiet, demo, local, pinned-folder; and "
                 "scenario:NAME for the 9 shipped scenarios, see verity sources)", id="name"),
    pytest.param("scenario:nope", "(shipped scenarios: scenario:billing-no-evidence, ",
                 id="scenario"),
])
def test_reference__an_unknown_name_is_one_line_listing_the_known(
    registry: SourceRegistry, name: str, known: str
) -> None:
    with pytest.raises(UnknownSourceError) as raised:
        registry.reference(name)
    message = str(raised.value)
    assert isinstance(raised.value, InputError) and "\n" not in message
    assert message.startswith(f"unknown source {name!r} {known}")


def test_reference__a_long_list_of_names_is_counted_not_listed(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text("".join(f'[sources.s{i}]\nscenario = "billing-no-evidence"\n'
                            for i in range(20)), encoding="utf-8")
    with pytest.raises(UnknownSourceError, match=r"\(known: 20 names; and scenario:NAME"):
        SourceRegistry(path=file, explicit=True).reference("nope")


def test_reference__a_broken_sources_file_is_a_configuration_error(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text("[sources.x]\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="needs a scenario or at least one backend"):
        SourceRegistry(path=file, explicit=True).reference("x")


# -- resolving -------------------------------------------------------------------------------


def test_resolve__scenarios_by_name_folder_and_configured_entry(
    registry: SourceRegistry, config_file: Path,
) -> None:
    shipped = registry.resolve("scenario:checkout-pool-exhaustion")
    assert isinstance(shipped, ScenarioSource) and shipped.path == CHECKOUT.resolve()
    assert shipped.now == load_scenario(CHECKOUT).now
    assert registry.resolve(f"scenario:checkout-pool-exhaustion@{AT:%Y-%m-%dT%H:%M:%SZ}"
                            ).now == AT
    folder = registry.resolve(str(CHECKOUT))
    assert isinstance(folder, ScenarioSource) and folder.name == str(CHECKOUT)
    demo = registry.resolve("demo")
    assert isinstance(demo, ScenarioSource) and demo.name == "demo"
    assert demo.path == CHECKOUT.resolve()
    local = registry.resolve("local")  # relative to the sources file's folder
    assert isinstance(local, ScenarioSource)
    assert local.path == (config_file.parent / "incidents" / "mine").resolve()
    assert isinstance(registry.resolve("pinned-folder"), ScenarioSource)


def test_resolve__each_capability_goes_to_its_backend(
    registry: SourceRegistry, made: Made,
) -> None:
    prod = registry.resolve("prod@2026-12-01T17:00:00Z")
    assert prod.now == AT and prod.name == "prod"
    prod.search_logs(LogQuery(start=START, end=END))
    prod.query_metrics(MetricQuery(start=START, end=END))
    prod.list_alerts(AlertQuery(start=START, end=END))
    prod.list_deployments(ChangeQuery(start=START, end=END))
    prod.get_events(EventQuery(start=START, end=END))
    assert made.kinds() == ["loki", "prometheus", "alertmanager", "kubernetes"]
    asked = {b.kind: [type(q).__name__ for q in b.asked] for b in made.backends}
    # alerts: the window's history from Prometheus's ALERTS, what fires now from Alertmanager
    assert asked == {"loki": ["LogQuery"], "prometheus": ["MetricQuery", "AlertQuery"],
                     "alertmanager": ["AlertQuery"],
                     "kubernetes": ["ChangeQuery", "EventQuery"]}
    assert [h.runbook.doc_id for h in prod.runbook_index().search("pool exhausted")] == ["RB-1"]


def test_resolve__alerts_from_prometheus_without_an_alertmanager(
    registry: SourceRegistry, made: Made,
) -> None:
    registry.resolve("metrics-only").list_alerts(AlertQuery(start=START, end=END))
    assert made.kinds() == ["prometheus"]
    with pytest.raises(SourceError, match=r"^quiet has no alerts backend \(configure "
                                          r"\[sources.quiet.alertmanager\]\)$"):
        registry.resolve("quiet").list_alerts(AlertQuery(start=START, end=END))


@pytest.mark.parametrize(("call", "message"), [
    pytest.param(lambda s: s.search_logs(LogQuery(start=START, end=END)),
                 "metrics-only has no logs backend (configure [sources.metrics-only.loki])",
                 id="logs"),
    pytest.param(lambda s: s.list_deployments(ChangeQuery(start=START, end=END)),
                 "metrics-only has no deployments backend (configure "
                 "[sources.metrics-only.kubernetes])", id="deployments"),
    pytest.param(lambda s: s.get_events(EventQuery(start=START, end=END)),
                 "metrics-only has no events backend (configure "
                 "[sources.metrics-only.kubernetes])", id="events"),
])
def test_resolve__a_capability_without_a_backend_is_a_source_error(
    registry: SourceRegistry, call: Any, message: str,
) -> None:
    with pytest.raises(SourceError) as raised:
        call(registry.resolve("metrics-only"))
    assert str(raised.value) == message


def test_resolve__no_runbook_folder_is_an_empty_index(registry: SourceRegistry) -> None:
    index = registry.resolve("metrics-only").runbook_index()
    assert len(index) == 0 and index.search("anything") == []


def test_run_tool__a_missing_backend_is_an_error_invocation_with_its_reason(
    registry: SourceRegistry,
) -> None:
    request = ToolCallRequest(tool_call_id="toolu_01NoLogs000000000000000", tool_name="search_logs",
                              arguments={"service": "checkout-service"})
    invocation = run_tool(default_registry(), request, source=registry.resolve("metrics-only"),
                          max_items=50, max_bytes=16384)
    assert invocation.status is LifecycleStatus.ERROR
    assert invocation.evidence_status is EvidenceStatus.ERROR
    assert invocation.error == ("SourceError: metrics-only has no logs backend (configure "
                                "[sources.metrics-only.loki])")


def test_run_tool__the_scope_records_both_queries_a_tool_ran(registry: SourceRegistry) -> None:
    request = ToolCallRequest(tool_call_id="toolu_01Metrics00000000000000",
                              tool_name="query_metrics", arguments={"service": "checkout"})
    invocation = run_tool(default_registry(), request,
                          source=registry.resolve("prod@2026-12-01T17:00:00Z"),
                          max_items=50, max_bytes=16384)
    assert invocation.projection is not None
    assert invocation.projection.scope.queries == [
        "prometheus: 2026-12-01T15:00:00+00:00", "prometheus: 2026-12-01T13:00:00+00:00"]


def test_resolve__a_missing_backend_module_is_a_source_error(
    registry: SourceRegistry, config_file: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(composite_module.BACKEND_CLASSES, "loki",
                        ("pipeline.sources.no_such_backend", "Loki"))
    bare = SourceRegistry(path=config_file, explicit=True)  # no fakes: the real table
    with pytest.raises(SourceError, match=r"^prod/loki is not available in this installation "
                                          r"\(ModuleNotFoundError: "):
        bare.resolve("prod").search_logs(LogQuery(start=START, end=END))


# -- caching and reloading -------------------------------------------------------------------


def test_cache__one_backend_per_source_shared_by_pinned_views(
    registry: SourceRegistry, made: Made,
) -> None:
    first = registry.resolve("prod@2026-12-01T17:00:00Z")
    second = registry.resolve("prod@2026-12-01T15:00:00Z")
    for source in (first, second, registry.resolve("prod")):
        source.query_metrics(MetricQuery(start=START, end=END))
    assert made.kinds() == ["prometheus"] and len(made.backends[0].asked) == 3
    assert (first.now, second.now) == (AT, START)
    assert registry.resolve("prod").now >= datetime.now(UTC).replace(microsecond=0)


def test_cache__a_changed_file_rebuilds_only_the_sources_whose_table_changed(
    registry: SourceRegistry, made: Made, config_file: Path,
) -> None:
    query = MetricQuery(start=START, end=END)
    registry.resolve("prod").query_metrics(query)
    registry.resolve("metrics-only").query_metrics(query)
    text = CONFIG.replace('[sources.metrics-only]\nprometheus = { url = "http://prometheus:9090" }',
                          '[sources.metrics-only]\nprometheus = { url = "http://other:9090" }')
    assert text != CONFIG
    config_file.write_text(text + '\n[sources.added]\nscenario = "billing-no-evidence"\n',
                           encoding="utf-8")
    stat = config_file.stat()
    os.utime(config_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert "added" in registry.config().sources
    registry.resolve("prod").query_metrics(query)
    registry.resolve("metrics-only").query_metrics(query)
    assert [(b.source, b.config.url) for b in made.backends] == [
        ("prod", "http://prometheus:9090"), ("metrics-only", "http://prometheus:9090"),
        ("metrics-only", "http://other:9090")]
    assert len(made.backends[0].asked) == 2  # prod kept its backend


def test_cache__one_registry_per_sources_file(
    config_file: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VERITY_CONFIG", str(config_file))
    assert sources() is sources() and sources().path == config_file
    assert isinstance(load_source("demo"), ScenarioSource)
    monkeypatch.delenv("VERITY_CONFIG")
    assert sources().path != config_file
    with pytest.raises(UnknownSourceError):
        load_source("demo")
    with pytest.raises(InputError, match="this run has no data source"):
        load_source(None)


# -- describe and check ----------------------------------------------------------------------


def test_describe__configured_sources_then_shipped_scenarios(registry: SourceRegistry,
                                                             config_file: Path) -> None:
    infos = {info.name: info for info in registry.describe()}
    prod = infos["prod"]
    assert (prod.kind, prod.description) == ("backends", "Production")
    assert prod.backends == (
        ("prometheus", "http://prometheus:9090"), ("alertmanager", "http://alertmanager:9093"),
        ("loki", "http://loki:3100"), ("kubernetes", "https://k8s:6443"),
        ("runbooks", str((config_file.parent / "runbooks").resolve())))
    assert infos["demo"].kind == "scenario" and infos["demo"].scenario == str(CHECKOUT)
    assert infos["scenario:checkout-pool-exhaustion"].kind == "scenario"


def test_check__one_status_per_backend(registry: SourceRegistry) -> None:
    statuses = registry.check("prod")
    assert [(s.backend, s.reachable) for s in statuses] == [
        ("prometheus", True), ("alertmanager", True), ("loki", True), ("kubernetes", True),
        ("runbooks", True)]
    assert statuses[-1].detail == "1 runbooks"
    (scenario,) = registry.check("demo")
    assert scenario.reachable and scenario.detail.startswith("5841 log lines")


def test_check__a_backend_that_cannot_be_made_is_reported_not_raised(
    config_file: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(source: str, config: Any) -> ConfiguredSource:
        raise SourceError(f"{source}/prometheus needs the environment variable PROM_TOKEN, "
                          "which is not set")

    registry = SourceRegistry(path=config_file, explicit=True, factories={"prometheus": refuse})
    (status,) = registry.check("metrics-only")
    assert not status.reachable and "PROM_TOKEN" in status.detail
