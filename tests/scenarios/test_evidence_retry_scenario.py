"""catalog-pricing-rate-limit: a real critical evidence gap, and the one retry that closes it.

Driven node by node in this process, without the runtime. Cycle one (`run_in_process`, then the
Gatekeeper and the Verifier of `pipeline/run/nodes/`) finds the 503 burst and the deploy just
before it, but the deploy's change names pricing-api and nothing the investigation looked at
shows pricing-api: the root cause rests on timing alone, the Verifier says so with a critical
gap, and routing grants the EVIDENCE_GAP_ONLY cycle. Cycle two plans from that gap alone,
queries pricing-api's metrics, and the union of both cycles is judged PASS with the root cause
allowed. A copy with every name changed takes the same path: nothing here knows the scenario.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cycles import GapCycle, gap_cycle, union

from models.common import Verdict
from models.evaluation import StageStatus
from models.executor import ClaimKind
from models.gatekeeper import Severity
from models.invocation import ToolInvocation
from models.state import PipelineState
from models.verifier import EvidenceGap, RetryContext, Verification
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.inprocess import run_in_process
from pipeline.rules.routing import Node, after_verify, valid_critical_gaps
from pipeline.run import nodes
from pipeline.run.attempts import AttemptLog
from pipeline.scenarios import Scenario, load_scenario, scenario_path
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry

NAME = "catalog-pricing-rate-limit"
ROOT_START = ("Deploy catalog-service v4.2.0 at 10:12 UTC (prefetch prices from pricing-api for "
              "every product of a listing and raise the pricing-api client pool from 8 to 64 "
              "connections) caused the problems that began at 10:13 UTC")


@dataclass(frozen=True)
class Cycle:
    """One cycle's Executor document, invocations and the state after the Verifier."""

    document: dict[str, Any]
    invocations: list[ToolInvocation]
    state: PipelineState
    gaps: list[EvidenceGap]
    route: Node


def _judge(scenario: Scenario, document: dict[str, Any], invocations: list[ToolInvocation],
           *, retry: int = 0, previous: list[EvidenceGap] | None = None) -> Cycle:
    """Gatekeeper, Verifier and routing over one cycle's document."""
    state = PipelineState(
        query=scenario.meta.question, intent=scenario.meta.intent, evidence_retry_count=retry,
        retry_context=RetryContext(evidence_retry_count=retry,
                                   previous_gaps=[g.description for g in previous or []])
        if retry else None)
    state = nodes.gatekeep_node(state, document, invocations)
    state = nodes.verify_node(state, verifier=OfflineVerifier(), log=AttemptLog("retry-test"))
    assert state.gatekeeper is not None and state.verdict_ceiling is not None
    gaps = valid_critical_gaps(
        state.evidence_gaps,
        verified_claim_ids={c.claim_id for c in state.gatekeeper.verified_output.claims},
        known_tools=default_registry().names())
    route = after_verify(verifier_status=state.verifier_status, verdict=state.effective_verdict,
                         ceiling=state.verdict_ceiling, valid_gaps=gaps,
                         evidence_retry_count=retry)
    assert route.node is not Node.PLAN or route.evidence_gap_only
    return Cycle(document, invocations, state, gaps, route.node)


@dataclass(frozen=True)
class Retried:
    scenario: Scenario
    first: Cycle
    gap: GapCycle
    second: Cycle


def _retried(folder: Path) -> Retried:
    scenario = load_scenario(folder)
    registry = default_registry()
    loop = run_in_process(scenario.meta.question, source=ScenarioSource(scenario),
                          registry=registry,
                          known_services=scenario.services)
    first = _judge(scenario, json.loads(loop.final_output), list(loop.invocations))
    gap = gap_cycle(scenario, first.gaps, registry=registry)
    assert first.state.gatekeeper is not None
    merged = union(first.document, first.state.gatekeeper, gap.final_output)
    second = _judge(scenario, merged, [*first.invocations, *gap.invocations], retry=1,
                    previous=first.gaps)
    return Retried(scenario, first, gap, second)


@cache
def _shipped() -> Retried:
    return _retried(scenario_path(NAME))


def _checks(cycle: Cycle) -> dict[str, Verification]:
    return {c.claim_id: c.verification for c in cycle.state.claim_checks}


def _root(cycle: Cycle) -> dict[str, Any]:
    [root] = [c for c in cycle.document["claims"] if c["kind"] == ClaimKind.ROOT_CAUSE.value]
    return root


def test_retry__cycle_one_blames_the_deploy_on_timing_alone_and_leaves_a_critical_gap() -> None:
    first = _shipped().first
    assert first.state.verdict_ceiling is Verdict.PASS
    assert first.state.gatekeeper is not None
    assert first.state.gatekeeper.result.severity is Severity.PASS
    assert first.state.downgrades == []
    root = _root(first)
    assert root["text"].startswith(ROOT_START) and root["critical"]
    assert {b["tool_name"] for b in root["evidence_bindings"]} == {"list_deployments",
                                                                  "search_logs"}
    checks = _checks(first)
    assert checks.pop(root["claim_id"]) is Verification.OVERSTATED
    assert set(checks.values()) == {Verification.DIRECT_OBSERVATION}  # the rest is observed
    assert first.state.effective_verdict is Verdict.LOW_CONFID
    [gap] = first.gaps
    assert (gap.claim_id, gap.critical, gap.suggested_tool) == (
        root["claim_id"], True, "query_metrics")
    assert "pricing-api" in gap.description
    assert first.route is Node.PLAN  # the one EVIDENCE_GAP_ONLY cycle
    # nothing in cycle one looked at pricing-api
    assert all(i.arguments.get("service") != "pricing-api" for i in first.invocations)


def test_retry__the_gap_cycle_queries_exactly_what_the_gap_asks_for() -> None:
    retried = _shipped()
    plan = retried.gap.plan
    assert plan.evidence_gap_only and plan.service == "catalog-service"
    assert [(s.tool_name, s.arguments) for s in plan.steps] == [
        ("query_metrics", {"service": "pricing-api"})]
    assert [(i.tool_name, i.arguments) for i in retried.gap.invocations] == [
        ("query_metrics", {"service": "pricing-api"})]
    report = json.loads(retried.gap.final_output)
    assert [c["kind"] for c in report["claims"]] == ["FINDING", "FINDING"]
    assert all(c["critical"] and "pricing-api" in c["text"] for c in report["claims"])


def test_retry__the_union_passes_with_the_root_cause_of_cycle_one_allowed() -> None:
    retried = _shipped()
    second = retried.second
    claims = {c["claim_id"]: c for c in second.document["claims"]}
    first_ids = [c["claim_id"] for c in retried.first.document["claims"]]
    assert list(claims)[:len(first_ids)] == first_ids  # cycle one's claims all stay
    added = list(claims)[len(first_ids):]
    assert added == ["g1-c1", "g1-c2"]  # the gap cycle's, renamed where they collide
    assert second.state.gatekeeper is not None
    assert second.state.gatekeeper.result.severity is Severity.PASS
    assert second.state.downgrades == []
    checks = _checks(second)
    root = _root(second)
    assert checks[root["claim_id"]] is Verification.REASONABLE_INFERENCE
    assert set(checks.values()) <= {Verification.DIRECT_OBSERVATION,
                                    Verification.REASONABLE_INFERENCE}
    root_check = next(c for c in second.state.claim_checks if c.claim_id == root["claim_id"])
    cited = {e.evidence_id: e.claim_id for e in second.state.gatekeeper.verified_evidence}
    assert {cited[ref] for ref in root_check.evidence_refs} >= {root["claim_id"], *added[:1]}
    assert second.state.evidence_gaps == [] and second.gaps == []
    assert second.state.effective_verdict is Verdict.PASS
    assert second.route is Node.COMPOSE


def test_retry__the_answer_states_the_root_cause_and_not_the_red_herrings() -> None:
    retried = _shipped()
    state = nodes.prepare_composition(retried.second.state, retried.second.document)
    state = nodes.compose_node(state, composer=TemplateComposer(), log=AttemptLog("retry-test"))
    assert state.composer_status is StageStatus.OK and state.composer_output is not None
    assert state.composer_input is not None
    allowed = {c.claim_id: c for c in state.composer_input.allowed_claims}
    root = _root(retried.second)
    assert allowed[root["claim_id"]].kind is ClaimKind.ROOT_CAUSE
    summary = state.composer_output.answer_summary
    assert summary == f"Root cause: {root['text']}"
    meta = retried.scenario.meta
    assert meta.root_cause is not None
    assert all(text in summary for text in meta.root_cause.must_mention)
    for herring in meta.red_herrings:
        assert not any(text in summary for text in herring.must_not_blame)
    answer = state.composer_output.user_facing_answer
    assert "rate_limited_requests_per_second of pricing-api" in answer
    assert any(a.startswith("Roll back catalog-service to v4.1.3")
               for a in state.composer_output.recommended_actions)


def _renamed_copy(target: Path, names: dict[str, str]) -> Path:
    shutil.copytree(scenario_path(NAME), target)
    for path in target.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for old, new in names.items():
                text = text.replace(old, new)
            path.write_text(text, encoding="utf-8")
    return target


@pytest.mark.parametrize(
    "names",
    [
        pytest.param({"catalog-service": "listing-service", "pricing-api": "quote-gateway",
                      "v4.2.0": "v11.0.4"}, id="renamed"),
    ],
)
def test_retry__a_copy_with_other_names_takes_the_same_two_cycles(
    tmp_path: Path, names: dict[str, str]
) -> None:
    retried = _retried(_renamed_copy(tmp_path / "copy", names))
    [gap] = retried.first.gaps
    assert retried.first.state.effective_verdict is Verdict.LOW_CONFID
    assert "quote-gateway" in gap.description and gap.suggested_tool == "query_metrics"
    assert [(i.tool_name, i.arguments) for i in retried.gap.invocations] == [
        ("query_metrics", {"service": "quote-gateway"})]
    assert retried.second.state.effective_verdict is Verdict.PASS
    root = _root(retried.second)
    assert "v11.0.4" in root["text"] and "quote-gateway" in root["text"]
    assert _checks(retried.second)[root["claim_id"]] is Verification.REASONABLE_INFERENCE
    for old in names:
        assert old not in json.dumps(retried.second.document)
