"""The offline investigator in an EVIDENCE_GAP_ONLY cycle: only the gap plan's calls, and a
report of what they show that supplements the first cycle instead of restating it."""

from __future__ import annotations

import json
from typing import Any

from models.agent import ExecutorTurn, Transcript
from models.executor import ClaimKind, ExecutorEvidenceV2
from models.gatekeeper import Severity
from models.verifier import EvidenceGap
from pipeline.agents.investigator import OfflineExecutor, investigate
from pipeline.agents.planner import OfflinePlanner
from pipeline.rules.gatekeeper import gatekeep
from pipeline.scenarios import Scenario, load_scenario, scenario_path
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry, run_tool

QUESTION = "Why is catalog-service returning 503s?"


def _catalog() -> Scenario:
    return load_scenario(scenario_path("catalog-pricing-rate-limit"))


def _gap(description: str, tool: str) -> EvidenceGap:
    return EvidenceGap(claim_id="c3", description=description, critical=True,
                       suggested_tool=tool)


def _gap_cycle(scenario: Scenario, gaps: list[EvidenceGap]) -> tuple[Transcript, str, Any]:
    """Plan from the gaps, run the Executor to its report: (transcript, report, invocations)."""
    registry = default_registry()
    plan = OfflinePlanner().plan(QUESTION, registry=registry, gaps=gaps,
                                 known_services=scenario.services)
    transcript = Transcript(query=QUESTION, plan=plan, gaps=gaps)
    invocations = []
    for _ in range(3):
        step = OfflineExecutor().step(transcript, registry=registry)
        if step.final_output is not None:
            return transcript, step.final_output, invocations
        results = [run_tool(registry, r, source=ScenarioSource(scenario), max_items=50,
                            max_bytes=16384)
                   for r in step.tool_calls]
        invocations += results
        turn = ExecutorTurn(tool_calls=step.tool_calls, results=results)
        transcript = transcript.model_copy(update={"turns": [*transcript.turns, turn]})
    raise AssertionError("the gap cycle did not report")


def test_gap_mode__the_dependency_metrics_it_asked_for_become_critical_findings() -> None:
    gaps = [_gap("none of its evidence shows pricing-api behaving differently",
                 "query_metrics")]
    transcript, report, invocations = _gap_cycle(_catalog(), gaps)
    assert len(transcript.turns) == 1  # the gap calls, then the report: no leads followed
    assert [(i.tool_name, i.arguments) for i in invocations] == [
        ("query_metrics", {"service": "pricing-api"})]
    output = ExecutorEvidenceV2.model_validate_json(report)
    assert investigate(transcript).dropped == []
    texts = [c.text for c in output.claims]
    assert [t.split(":")[0] for t in texts] == ["http_requests_per_second of pricing-api",
                                                "rate_limited_requests_per_second of pricing-api"]
    assert all("shifted up from baseline at 2026-12-09T10:14:00Z" in t for t in texts)
    assert all(c.kind is ClaimKind.FINDING and c.critical for c in output.claims)
    assert {b.invocation_id for c in output.claims for b in c.evidence_bindings} == {
        invocations[0].tool_call_id}
    # it supplements the first cycle: no cause, hypothesis or action of its own
    assert output.hypotheses == [] and output.recommended_actions == []
    assert output.missing_info == []
    outcome = gatekeep(json.loads(report), invocations)
    assert outcome.result.severity is Severity.PASS


def test_gap_mode__a_gap_call_that_finds_nothing_says_the_gap_is_still_open() -> None:
    gaps = [_gap("the Warning events of pricing-api", "get_events")]
    _, report, invocations = _gap_cycle(_catalog(), gaps)
    assert [(i.tool_name, i.arguments) for i in invocations] == [
        ("get_events", {"service": "pricing-api", "type": "Warning"})]
    output = ExecutorEvidenceV2.model_validate_json(report)
    [claim] = output.claims
    assert claim.kind is ClaimKind.NEGATIVE_OBSERVATION and not claim.critical
    assert claim.text.startswith("No Kubernetes Warning events were found for the objects of "
                                 "pricing-api")
    assert all(b.path.startswith("$.scope") for b in claim.evidence_bindings)
    assert any("still open" in m for m in output.missing_info)
    assert gatekeep(json.loads(report), invocations).result.severity is Severity.PASS
