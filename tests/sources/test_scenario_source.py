"""`ScenarioSource`: the scenario folder behind the pushed-down protocol.

The equivalence test replays 582 tool calls (every shipped scenario, every tool, every
service, filters, windows, lookbacks) and compares each invocation with its digest computed by
the code before sources were pushed down (`scenario_tool_digests.json`, made by running
`calls.py` on commit 2d00e4a, where tools filtered a Scenario's whole lists themselves).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from models.agent import ToolCallRequest
from pipeline.data.records import LEVEL_RANK
from pipeline.data.source import (
    LOG_FETCH_LIMIT,
    AlertQuery,
    ChangeQuery,
    EventQuery,
    LogQuery,
    MetricQuery,
)
from pipeline.scenarios import Scenario, default_scenarios_dir, list_scenarios, load_scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry, run_tool
from tests.sources.calls import CALL_ID, calls, digest

DIGESTS = json.loads((Path(__file__).parent / "scenario_tool_digests.json").read_text())
NAMES = [info.name for info in list_scenarios()]


def _scenario(name: str) -> Scenario:
    return load_scenario(default_scenarios_dir() / name)


def _run(source: ScenarioSource, tool: str, args: dict[str, Any]) -> Any:
    request = ToolCallRequest(tool_call_id=CALL_ID, tool_name=tool, arguments=args)
    return run_tool(default_registry(), request, source=source, max_items=50, max_bytes=16384)


def _log_count(scenario: Scenario, args: dict[str, Any]) -> int:
    """Lines a search_logs call matches, filtered the plain way."""
    end = scenario.now
    start = end - timedelta(minutes=args.get("lookback_minutes", 120))
    return sum(1 for e in scenario.logs if start <= e.at <= end
               and (args.get("service") is None or e.service == args["service"]))


def test_equivalence__the_digests_cover_every_shipped_scenario() -> None:
    assert sorted(DIGESTS) == sorted(NAMES)
    assert sum(len(rows) for rows in DIGESTS.values()) == 582


@pytest.mark.parametrize("name", NAMES)
def test_equivalence__every_tool_call_gives_what_the_old_in_memory_path_gave(name: str) -> None:
    scenario = _scenario(name)
    source = ScenarioSource(scenario)
    expected = DIGESTS[name]
    made = calls(scenario)
    assert [[tool, args] for tool, args in made] == [[t, a] for t, a, _ in expected]
    cut = []
    for (tool, args), (_, _, old) in zip(made, expected, strict=True):
        invocation = _run(source, tool, args)
        if tool == "search_logs" and _log_count(scenario, args) > LOG_FETCH_LIMIT:
            cut.append(invocation)  # the old path read every line: these differ on purpose
            continue
        assert digest(invocation) == old, (tool, args)
    for invocation in cut:
        document = invocation.projection.model_dump(mode="json")
        total = _log_count(scenario, invocation.arguments)
        assert document["total"] == total
        assert document["truncated_fetch"]["window"] == {"fetched": LOG_FETCH_LIMIT,
                                                         "total": total}
        assert f"over the first {LOG_FETCH_LIMIT} lines of the window" in document["summary"]


def test_equivalence__a_fetch_past_the_limit_happens_in_the_shipped_data() -> None:
    """The cut branch above is exercised (so that test can fail on it)."""
    scenario = _scenario("catalog-pricing-rate-limit")
    assert _log_count(scenario, {"lookback_minutes": 300}) > LOG_FETCH_LIMIT


@pytest.mark.parametrize("name", NAMES)
def test_search_logs__the_plain_filter(name: str) -> None:
    scenario = _scenario(name)
    source = ScenarioSource(scenario)
    end = scenario.now
    start = end - timedelta(hours=2)
    for service in [None, *scenario.services]:
        for level, terms in ((None, ()), ("WARN", ()), (None, ("error",)), ("ERROR", ("db",))):
            fetched = source.search_logs(LogQuery(start=start, end=end, service=service,
                                                  min_level=level, terms=terms, limit=100))
            plain = [e for e in scenario.logs if start <= e.at <= end
                     and (service is None or e.service == service)
                     and e.rank >= (LEVEL_RANK[level] if level else 0)
                     and all(t in e.message.lower() for t in terms)]
            assert list(fetched.items) == plain[:100]
            assert fetched.total == len(plain)
            assert fetched.truncated == (len(plain) > 100)
            assert fetched.queries == () and fetched.fetched_bytes == 0


@pytest.mark.parametrize("name", NAMES)
def test_query_metrics__series_cut_to_the_window(name: str) -> None:
    scenario = _scenario(name)
    source = ScenarioSource(scenario)
    end = scenario.now
    start = end - timedelta(minutes=45)
    for service in [None, *scenario.services]:
        fetched = source.query_metrics(MetricQuery(start=start, end=end, service=service,
                                                   metric="ERR"))
        plain = {(s.service, s.metric): [(t, v) for t, v in zip(s.times, s.values, strict=True)
                                         if start <= t <= end]
                 for s in scenario.series
                 if (service is None or s.service == service) and "err" in s.metric.lower()}
        got = {(s.service, s.metric): list(zip(s.times, s.values, strict=True))
               for s in fetched.items}
        assert got == {k: v for k, v in plain.items() if v}


@pytest.mark.parametrize("name", NAMES)
def test_alerts_deployments_events__the_plain_filters(name: str) -> None:
    scenario = _scenario(name)
    source = ScenarioSource(scenario)
    end = scenario.now
    start = end - timedelta(hours=6)
    for service in [None, *scenario.services]:
        alerts = source.list_alerts(AlertQuery(start=start, end=end, service=service,
                                               state="firing")).items
        assert alerts == sorted(
            (a for a in scenario.alert_list if a.state == "firing"
             and (service is None or a.service == service) and a.starts_at <= end
             and (a.ends_at is None or a.ends_at >= start)),
            key=lambda a: (a.starts_at, a.name))
        changes = source.list_deployments(ChangeQuery(start=start, end=end, service=service))
        assert list(changes.items) == [d for d in scenario.deployment_list
                                       if (service is None or d.service == service)
                                       and start <= d.deployed_at <= end]
        events = source.get_events(EventQuery(start=start, end=end, service=service,
                                              type="Warning")).items
        assert list(events) == [e for e in scenario.event_list
                                if start <= e.ts <= end and e.type == "Warning"
                                and (service is None or e.object == service
                                     or e.object.startswith(f"{service}-"))]


def test_name__a_shipped_scenario_is_scenario_name_and_a_folder_its_path(
    tmp_path: Path,
) -> None:
    assert ScenarioSource(_scenario("checkout-pool-exhaustion")).name == \
        "scenario:checkout-pool-exhaustion"
    copy = tmp_path / "my-incident"
    shutil.copytree(default_scenarios_dir() / "billing-no-evidence", copy)
    assert ScenarioSource(load_scenario(copy)).name == str(copy.resolve())


def test_now__the_scenario_s_own_unless_pinned() -> None:
    scenario = _scenario("checkout-pool-exhaustion")
    assert ScenarioSource(scenario).now == scenario.now
    moment = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)
    pinned = ScenarioSource(scenario, now=moment)
    assert pinned.now == moment
    invocation = _run(pinned, "search_logs", {"service": "checkout-service"})
    assert invocation.projection.scope.window.end == "2026-11-30T13:00:00Z"


def test_scope__no_queries_key_for_an_in_memory_source() -> None:
    invocation = _run(ScenarioSource(_scenario("checkout-pool-exhaustion")), "query_metrics",
                      {"service": "checkout-service"})
    assert invocation.projection.scope.queries is None
    assert "queries" not in invocation.projection.model_dump(mode="json")["scope"]
