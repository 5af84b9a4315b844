"""The offline investigator: turns, tool call ids, leads followed, and claims that verify.

Scenario outcomes are judged in tests/scenarios; these tests pin the loop's mechanics and the
rules for blaming (timing and naming) on edited copies of the scenarios.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from models.agent import ExecutorTurn, Transcript
from models.bundle import RunBundle
from models.executor import ClaimKind, ExecutorEvidenceV2
from models.gatekeeper import Severity
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from models.verifier import EvidenceGap
from pipeline.agents.investigator import (
    MAX_TURNS,
    OfflineExecutor,
    investigate,
    next_call_id,
)
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.planner import OfflinePlanner
from pipeline.agents.template_composer import TemplateComposer
from pipeline.inprocess import run_in_process
from pipeline.rules.gatekeeper import gatekeep
from pipeline.scenarios import Scenario, load_scenario, scenario_path
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry, run_tool
from pipeline.verification import verify_bundle

ID_SHAPE = re.compile(r"^toolu_01[0-9A-Za-z]{22}$")
QUESTION = "Why is checkout-service returning 500s?"


def _checkout() -> Scenario:
    return load_scenario(scenario_path("checkout-pool-exhaustion"))


def _transcript(scenario: Scenario, query: str, **plan_args: Any) -> Transcript:
    plan = OfflinePlanner().plan(query, registry=default_registry(),
                                 known_services=scenario.services, **plan_args)
    return Transcript(query=query, plan=plan, gaps=plan_args.get("gaps") or [])


def _advance(transcript: Transcript, scenario: Scenario) -> tuple[Transcript, Any]:
    """One Executor step; if it asks for tools, run them and append the turn."""
    registry = default_registry()
    step = OfflineExecutor().step(transcript, registry=registry)
    if step.final_output is not None:
        return transcript, step
    results = [run_tool(registry, r, source=ScenarioSource(scenario), max_items=50, max_bytes=16384)
               for r in step.tool_calls]
    turn = ExecutorTurn(tool_calls=step.tool_calls, results=results)
    return transcript.model_copy(update={"turns": [*transcript.turns, turn]}), step


def test_investigator__turn_zero_asks_for_the_plan_with_fresh_ids() -> None:
    transcript = _transcript(_checkout(), QUESTION)
    step = OfflineExecutor().step(transcript, registry=default_registry())
    assert step.final_output is None
    assert [(c.tool_name, c.arguments) for c in step.tool_calls] == [
        (s.tool_name, s.arguments) for s in transcript.plan.steps]
    ids = [c.tool_call_id for c in step.tool_calls]
    assert all(ID_SHAPE.match(i) for i in ids) and len(set(ids)) == len(ids)
    again = OfflineExecutor().step(transcript, registry=default_registry())
    assert [c.tool_call_id for c in again.tool_calls] == ids  # derived, not random


def test_investigator__ids_are_unique_across_the_run_and_across_cycles() -> None:
    scenario = _checkout()
    loop = run_in_process(QUESTION, source=ScenarioSource(scenario), registry=default_registry(),
                          known_services=scenario.services)
    ids = [i.tool_call_id for i in loop.invocations]
    assert len(ids) == len(set(ids)) >= 8
    gaps = [EvidenceGap(claim_id="c3", description="Claim c3 needs evidence.", critical=True,
                        suggested_tool="search_logs")]
    retry = _transcript(scenario, QUESTION, gaps=gaps)
    step = OfflineExecutor().step(retry, registry=default_registry())
    assert not {c.tool_call_id for c in step.tool_calls} & set(ids)


def test_investigator__a_taken_id_is_redrawn() -> None:
    first = next_call_id("state", turn=0, index=0, taken=set())
    second = next_call_id("state", turn=0, index=0, taken={first})
    assert first != second and ID_SHAPE.match(second)


def test_investigator__follows_leads_then_reports_within_the_turn_limit() -> None:
    scenario = _checkout()
    transcript = _transcript(scenario, QUESTION)
    transcript, _ = _advance(transcript, scenario)
    transcript, follow = _advance(transcript, scenario)
    asked = {(c.tool_name, json.dumps(c.arguments, sort_keys=True)) for c in follow.tool_calls}
    # payment-db is named in the new error messages; deploys around the onset; the runbooks
    assert ("search_logs", json.dumps({"level": "WARN", "service": "payment-db"})) in asked
    assert ("query_metrics", json.dumps({"service": "payment-db"})) in asked
    assert any(tool == "list_deployments" and "window" in args for tool, args in asked)
    assert any(tool == "search_runbooks" for tool, _ in asked)
    transcript, final = _advance(transcript, scenario)
    assert final.final_output is not None and len(transcript.turns) == 2


def test_investigator__never_more_than_the_turn_limit() -> None:
    scenario = _checkout()
    transcript = _transcript(scenario, QUESTION)
    for _ in range(MAX_TURNS):
        transcript, _ = _advance(transcript, scenario)
    padded = transcript.model_copy(update={"turns": [*transcript.turns] * 2})
    step = OfflineExecutor().step(padded, registry=default_registry())
    assert step.final_output is not None and not step.tool_calls


def test_investigator__gap_mode_runs_the_gap_calls_and_reports() -> None:
    scenario = _checkout()
    gaps = [EvidenceGap(claim_id="c2", description="Claim c2 needs evidence for its quantity.",
                        critical=True, suggested_tool="query_metrics")]
    transcript = _transcript(scenario, QUESTION, gaps=gaps)
    assert [s.tool_name for s in transcript.plan.steps] == ["query_metrics"]
    transcript, _ = _advance(transcript, scenario)
    _, step = _advance(transcript, scenario)
    assert step.final_output is not None  # no leads followed in EVIDENCE_GAP_ONLY mode
    output = ExecutorEvidenceV2.model_validate_json(step.final_output)
    assert output.claims and all(b.tool_name == "query_metrics"
                                 for c in output.claims for b in c.evidence_bindings)


def test_investigator__output_is_executor_v2_and_every_binding_passes() -> None:
    scenario = _checkout()
    loop = run_in_process(QUESTION, source=ScenarioSource(scenario), registry=default_registry(),
                          known_services=scenario.services)
    document = json.loads(loop.final_output)
    assert "diagnosis_summary" not in document and "user_facing_answer" not in document
    outcome = gatekeep(document, loop.invocations)
    assert outcome.result.severity is Severity.PASS
    assert len(outcome.verified_output.claims) == len(document["claims"])
    output = ExecutorEvidenceV2.model_validate(document)
    ids = {c.claim_id for c in output.claims}
    assert all(set(a.claim_ids) <= ids and a.claim_ids for a in output.recommended_actions)
    assert all(set(h.claim_ids) <= ids for h in output.hypotheses)


def test_investigator__a_failed_call_becomes_missing_information() -> None:
    scenario = _checkout()
    transcript = _transcript(scenario, QUESTION)
    transcript, _ = _advance(transcript, scenario)
    [turn] = transcript.turns
    broken = [r if r.tool_name != "query_metrics" else r.model_copy(update={
        "status": LifecycleStatus.ERROR, "evidence_status": EvidenceStatus.ERROR,
        "projection": None, "error": "TimeoutError: metrics backend timed out"})
        for r in turn.results]
    transcript = transcript.model_copy(update={"turns": [turn.model_copy(
        update={"results": broken})]})
    investigation = investigate(transcript)
    output = investigation.output
    assert investigation.dropped == []
    # the reason the tool answered, without the error's class name (issue 23, item 5)
    assert ("The query_metrics call for checkout-service failed (metrics backend timed out): "
            "its evidence is missing.") in output.missing_info
    assert not any("TimeoutError" in m for m in output.missing_info)
    failed = next(r.tool_call_id for r in broken if r.status is LifecycleStatus.ERROR)
    assert all(b.invocation_id != failed for c in output.claims for b in c.evidence_bindings)
    assert any(c.kind is ClaimKind.ROOT_CAUSE for c in output.claims)


def test_investigator__no_evidence_calls_are_negative_observations_on_their_scope() -> None:
    scenario = load_scenario(scenario_path("billing-no-evidence"))
    loop = run_in_process("Is billing-service throwing errors this morning?",
                          source=ScenarioSource(scenario),
                          registry=default_registry(), known_services=scenario.services)
    empty: dict[str, ToolInvocation] = {
        i.tool_call_id: i for i in loop.invocations
        if i.evidence_status is EvidenceStatus.NO_EVIDENCE}
    assert len(empty) == 3
    output = ExecutorEvidenceV2.model_validate_json(loop.final_output)
    cited = {b.invocation_id for c in output.claims for b in c.evidence_bindings}
    assert set(empty) <= cited
    for claim in output.claims:
        for binding in claim.evidence_bindings:
            if binding.invocation_id in empty:
                assert claim.kind is ClaimKind.NEGATIVE_OBSERVATION
                assert binding.path.startswith("$.scope.")


def test_investigator__a_question_without_a_service_finds_the_failing_one() -> None:
    scenario = _checkout()
    loop = run_in_process("Why are we returning errors?", source=ScenarioSource(scenario),
                          registry=default_registry(), known_services=scenario.services)
    assert loop.plan.service is None
    investigation = investigate(loop.transcript)
    assert investigation.dropped == []
    [root] = [c for c in investigation.output.claims if c.kind is ClaimKind.ROOT_CAUSE]
    assert "checkout-service v2.3.1" in root.text


def _edited(tmp_path: Path, name: str, edit: Any) -> Scenario:
    folder = tmp_path / name
    shutil.copytree(scenario_path(name), folder)
    path = folder / "deployments.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text())), indent=1))
    return load_scenario(folder)


def _root_causes(scenario: Scenario) -> list[str]:
    loop = run_in_process(scenario.meta.question, source=ScenarioSource(scenario),
                          registry=default_registry(),
                          known_services=scenario.services)
    investigation = investigate(loop.transcript)
    assert investigation.dropped == []
    return [c.text for c in investigation.output.claims if c.kind is ClaimKind.ROOT_CAUSE]


def test_investigator__a_deploy_too_long_before_the_onset_is_not_blamed(tmp_path: Path) -> None:
    def earlier(deploys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for deploy in deploys:
            if deploy["version"] == "v2.3.1":
                deploy["deployed_at"] = "2026-11-30T11:30:00Z"  # 2.5 hours before the onset
        return deploys

    assert _root_causes(_edited(tmp_path, "checkout-pool-exhaustion", earlier)) == []


def test_investigator__a_deploy_after_the_onset_is_not_blamed(tmp_path: Path) -> None:
    def later(deploys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for deploy in deploys:
            if deploy["version"] == "v2.3.1":
                deploy["deployed_at"] = "2026-11-30T14:30:00Z"
        return deploys

    assert _root_causes(_edited(tmp_path, "checkout-pool-exhaustion", later)) == []


@pytest.mark.parametrize("service", ["payment-gateway", "orders-api"])
def test_investigator__a_deploy_of_a_named_or_failing_service_in_time_is_blamed(
    tmp_path: Path, service: str
) -> None:
    def move(deploys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for deploy in deploys:
            if deploy["service"] == "recommendation-service":
                deploy["service"] = service  # same time, now on the orders path
        return deploys

    [root] = _root_causes(_edited(tmp_path, "orders-latency-payment-gateway", move))
    assert root.startswith(f"Deploy {service} v3.4.0 at 12:58 UTC")


def test_investigator__a_healthy_named_dependency_is_only_a_hypothesis(tmp_path: Path) -> None:
    def without_the_deploy(deploys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [d for d in deploys if d["version"] != "v2.3.1"]

    scenario = _edited(tmp_path, "checkout-pool-exhaustion", without_the_deploy)
    loop = run_in_process(QUESTION, source=ScenarioSource(scenario), registry=default_registry(),
                          known_services=scenario.services)
    output = ExecutorEvidenceV2.model_validate_json(loop.final_output)
    assert not [c for c in output.claims if c.kind in (ClaimKind.ROOT_CAUSE,
                                                       ClaimKind.CONTRIBUTING_FACTOR)]
    hypothesis = "The checkout-service problems may come from payment-db, which its messages name"
    assert hypothesis in [h.text for h in output.hypotheses]
    bundle = RunBundle(query=QUESTION, invocations=loop.invocations,
                       executor_output_raw=loop.final_output)
    result = verify_bundle(bundle, verifier=OfflineVerifier(), composer=TemplateComposer()).result
    assert result.status == "SUCCESS"
    answer = result.final_answer.user_facing_answer
    assert f"Possible directions (not confirmed):\n- {hypothesis}" in answer
    assert "no root cause is confirmed" in result.final_answer.answer_summary


def test_investigator__without_any_evidence_it_claims_nothing() -> None:
    scenario = _checkout()
    transcript, _ = _advance(_transcript(scenario, QUESTION), scenario)
    [turn] = transcript.turns
    failed = [r.model_copy(update={"status": LifecycleStatus.ERROR, "projection": None,
                                   "evidence_status": EvidenceStatus.ERROR, "error": "x"})
              for r in turn.results]
    transcript = transcript.model_copy(update={"turns": [turn.model_copy(
        update={"results": failed})]})
    step = OfflineExecutor().step(transcript, registry=default_registry())
    assert step.final_output is not None  # no lead to follow without evidence
    output = ExecutorEvidenceV2.model_validate_json(step.final_output)
    assert output.claims == [] and output.recommended_actions == []
    assert sum(" failed" in m and m.endswith(": its evidence is missing.")
               for m in output.missing_info) == 4
