"""The EVIDENCE_GAP_ONLY cycle supplements the first: what cycle one verified stays, the gap
cycle's claims are added, and the Verifier judges the union (issue: the retry replaced 12 claims
with 3 and lost the confirmed v2.3.1 root cause)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from models.common import RunStatus, Verdict
from models.verifier import EvidenceGap, VerifierInput
from pipeline.agents.offline_verifier import verify
from pipeline.factory import offline_agents
from pipeline.inprocess import investigate, result
from pipeline.rules.evidence_retry import carry, supplement
from pipeline.rules.gatekeeper import gatekeep
from pipeline.scenarios import default_scenarios_dir, load_scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry
from tests.doubles import function_model
from tests.spec.helpers import good_output, invocations

CHECKOUT = default_scenarios_dir() / "checkout-pool-exhaustion"


def _claim(claim_id: str, text: str = "HTTP 500 errors") -> dict[str, Any]:
    return {"claim_id": claim_id, "text": text, "kind": "FINDING", "critical": False,
            "status": "CONFIRMED", "evidence_bindings": []}


def test_carry__keeps_verified_claims_with_only_their_passed_bindings() -> None:
    document = good_output()
    bad = {**document["claims"][0], "claim_id": "c9",
           "evidence_bindings": [{**document["claims"][0]["evidence_bindings"][0],
                                  "matched_text": "not in the logs"}]}
    mixed = {**document["claims"][1], "evidence_bindings": [
        *document["claims"][1]["evidence_bindings"],
        {**document["claims"][1]["evidence_bindings"][0], "path": "$.nowhere"}]}
    document = {**document, "claims": [document["claims"][0], mixed, *document["claims"][2:], bad],
                "hypotheses": [{"text": "rests on c9", "claim_ids": ["c9"]},
                               {"text": "rests on c1", "claim_ids": ["c1"]}]}
    outcome = gatekeep(document, invocations())
    kept = carry(document, outcome)
    ids = [c["claim_id"] for c in kept["claims"]]
    assert "c9" not in ids and ids == [c.claim_id for c in outcome.verified_output.claims]
    assert len(next(c for c in kept["claims"] if c["claim_id"] == mixed["claim_id"])
               ["evidence_bindings"]) == 1
    assert [h["text"] for h in kept["hypotheses"]] == ["rests on c1"]
    # what is carried passes the Gatekeeper again, binding for binding
    again = gatekeep(kept, invocations())
    assert not again.result.failed_rules
    assert len(again.verified_evidence) == len(outcome.verified_evidence)


def test_supplement__renames_a_reused_claim_id_and_its_citations() -> None:
    carried = {"claims": [_claim("c1"), _claim("c2")],
               "hypotheses": [{"text": "h", "claim_ids": ["c1"]}], "missing_info": ["traces"],
               "recommended_actions": []}
    gap_cycle = {"claims": [_claim("c1", "pool wait p99 800 ms"), _claim("c3")],
                 "hypotheses": [{"text": "h2", "claim_ids": ["c1", "c3"]}],
                 "missing_info": ["traces"],
                 "recommended_actions": [{"text": "resize", "claim_ids": ["c1"]}]}
    merged = supplement(carried, gap_cycle)
    assert [c["claim_id"] for c in merged["claims"]] == ["c1", "c2", "g1-c1", "c3"]
    assert merged["claims"][2]["text"] == "pool wait p99 800 ms"
    assert merged["hypotheses"] == [{"text": "h", "claim_ids": ["c1"]},
                                    {"text": "h2", "claim_ids": ["g1-c1", "c3"]}]
    assert merged["recommended_actions"] == [{"text": "resize", "claim_ids": ["g1-c1"]}]
    assert merged["missing_info"] == ["traces"]


def test_supplement__of_nothing_new_is_the_carried_document() -> None:
    carried = {"claims": [_claim("c1")], "hypotheses": [], "missing_info": [],
               "recommended_actions": []}
    assert supplement(carried, {"claims": []}) == carried


def _gap_once(payload: bytes) -> str:
    """The offline Verifier, but in the first cycle LOW_CONFID with a critical gap on the first
    claim (a stand-in for a model that wants one more signal)."""
    verifier_input = VerifierInput.model_validate_json(payload)
    output = verify(verifier_input)
    if verifier_input.retry_context is None:
        first = verifier_input.verified_executor_output.claims[0].claim_id
        gap = EvidenceGap(claim_id=first, critical=True, suggested_tool="query_metrics",
                          description="Pool utilization metrics are needed to confirm it.")
        output = output.model_copy(update={"verdict": Verdict.LOW_CONFID,
                                           "evidence_gaps": [gap]})
    return output.model_dump_json()


def test_gap_cycle__keeps_the_confirmed_root_cause_of_cycle_one() -> None:
    scenario = load_scenario(Path(CHECKOUT))
    plain = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                        registry=default_registry())
    first = result(plain)
    assert first.verdict is Verdict.PASS and "v2.3.1" in first.final_answer.answer_summary
    first_claims = {c.claim_id for c in first.self_evaluation.verifier_evaluation.claim_checks}

    gap_once = function_model(_gap_once, model="test-gap-once")
    agents = dataclasses.replace(offline_agents(), verifier=gap_once)
    run = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                      registry=default_registry(), agents=agents)
    final = result(run)
    kinds = [(node, kind) for node, kind, _ in run.events]
    assert ("verify", "evidence_retry") in kinds and ("execute", "supplemented") in kinds
    assert run.visited.count("plan") == 2
    assert final.status == RunStatus.SUCCESS.value and final.verdict is Verdict.PASS
    checks = {c.claim_id for c in final.self_evaluation.verifier_evaluation.claim_checks}
    assert first_claims <= checks, "a claim verified in cycle one was lost"
    assert len(checks) >= len(first_claims)
    assert "v2.3.1" in final.final_answer.answer_summary
    # the gap cycle's own calls were added to the run's, none replaced
    assert len(run.invocations) > len(plain.invocations)
    assert {i.tool_call_id for i in plain.invocations} <= {i.tool_call_id for i in run.invocations}
