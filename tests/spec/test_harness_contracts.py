"""spec/harness-contracts.md: one test per deterministic scenario.

Scenarios that belong to the Celery runtime (previous-turn selection from the store,
cancellation, knowledge-answer document validation) are tested with the runtime, and "Phase
gates" is a process rule of the earlier project that DESIGN.md says does not apply.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from models.common import FallbackType, Verdict
from models.evaluation import StageStatus
from models.executor import ClaimKind
from models.fallback import FallbackReason
from models.gatekeeper import RuleId, Severity
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from models.state import PipelineState
from models.verifier import Verification
from pipeline.errors import BundleError, ProviderUnavailableError
from pipeline.rules import routing
from pipeline.rules.gatekeeper import gatekeep
from pipeline.rules.routing import Node, Route
from pipeline.run import nodes
from pipeline.run.evaluation import aiops_rule_evaluation
from pipeline.verification import load_bundle

from .helpers import (
    EMPTY_ID,
    QUERY,
    answer_text,
    binding,
    bundle,
    claim,
    composer_reply,
    empty_invocation,
    errors_claim,
    executor_output,
    good_output,
    invocations,
    rate_claim,
    run,
    scripted,
    verifier_reply,
)

PIPELINE = Path(__file__).resolve().parents[2] / "pipeline"
DETERMINISTIC = (*(f"rules/{p.stem}" for p in sorted((PIPELINE / "rules").glob("*.py"))
                   if p.stem != "__init__"), "serialization", "run/evaluation")
"""Every pure deterministic rule (`pipeline/rules/`), and what maps a state to its result."""
ALL_DIRECT = {"c1": "direct_observation", "c2": "direct_observation"}


def imported_modules(module: str) -> set[str]:
    tree = ast.parse((PIPELINE / f"{module}.py").read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


# --- Requirement: Design contracts SHALL separate deterministic control from reasoning ------

@pytest.mark.parametrize("module", DETERMINISTIC)
def test_contracts__contract_ownership_is_inspected(module: str) -> None:
    """Deterministic control never calls a model, a broker or a database."""
    imports = imported_modules(module)
    forbidden = ("pipeline.agents", "pipeline.run.attempts", "pipeline.store", "celery",
                 "anthropic", "sqlalchemy", "redis", "tasks")
    assert not [name for name in imports if name.startswith(forbidden)]


# --- Requirement: Tool invocation identity SHALL use the framework Tool Call ID -------------

def test_tool_call_id__duplicate_tool_call_id_is_proposed() -> None:
    data = json.loads(bundle(good_output()).model_dump_json())
    first = data["invocations"][0]
    second = {**first, "tool_name": "query_metrics", "projection": {"scope": {}, "x": 1}}
    data["invocations"].insert(1, second)
    with pytest.raises(BundleError, match=f"duplicate tool_call_id '{first['tool_call_id']}'"):
        load_bundle(json.dumps(data))
    # the first canonical invocation is what a bundle without the duplicate keeps
    del data["invocations"][1]
    assert load_bundle(json.dumps(data)).invocations[0].tool_name == "search_logs"


@pytest.mark.parametrize("bad_id", ["", "toolu 01", "toolu/01", "x" * 129],
                         ids=["empty", "space", "slash", "too-long"])
def test_tool_call_id__invalid_tool_call_id_is_rejected(bad_id: str) -> None:
    data = json.loads(bundle(good_output()).model_dump_json())
    data["invocations"][0]["tool_call_id"] = bad_id
    with pytest.raises(BundleError, match="tool_call_id"):
        load_bundle(json.dumps(data))


# --- Requirement: Invocation status and evidence status SHALL be independent ----------------

def test_status__successful_query_returns_no_evidence() -> None:
    empty = invocations()[3]
    assert empty.status is LifecycleStatus.READY
    assert empty.evidence_status is EvidenceStatus.NO_EVIDENCE
    negative = claim("c2", "No errors were logged by inventory-service",
                     binding(EMPTY_ID, "search_logs", "$.scope.service", "inventory-service"),
                     kind=ClaimKind.NEGATIVE_OBSERVATION, critical=False)
    outcome = gatekeep(executor_output(errors_claim(), negative), invocations())
    assert outcome.result.severity is Severity.PASS  # READY passes evidence.invocation_status
    item = [e for e in outcome.verified_evidence if e.claim_id == "c2"][0]
    assert item.evidence_status is EvidenceStatus.NO_EVIDENCE
    assert item.scope.service == "inventory-service"
    stats = aiops_rule_evaluation(invocations())
    assert stats["lifecycle"] == {"READY": 4}
    assert stats["evidence"] == {"EVIDENCE_FOUND": 3, "NO_EVIDENCE": 1}
    # the two axes are independent: an ERROR lifecycle fails however evidence is labelled
    errored = ToolInvocation(tool_call_id=EMPTY_ID, tool_name="search_logs",
                             status=LifecycleStatus.ERROR,
                             evidence_status=EvidenceStatus.NO_EVIDENCE,
                             projection=invocations()[3].projection)
    failed = gatekeep(executor_output(negative), [errored]).result
    assert failed.failed_rules == [RuleId.INVOCATION_STATUS]


@pytest.mark.parametrize(
    ("kind", "path", "matched", "passes"),
    [
        (ClaimKind.NEGATIVE_OBSERVATION, "$.scope.service", "inventory-service", True),
        (ClaimKind.NEGATIVE_OBSERVATION, "$['scope']['filter']", "level:error", True),
        (ClaimKind.NEGATIVE_OBSERVATION, "$.scope.window.start", "2026-11-30T14:00", True),
        (ClaimKind.FINDING, "$.scope.service", "inventory-service", False),
        (ClaimKind.ROOT_CAUSE, "$.scope.service", "inventory-service", False),
        (ClaimKind.NEGATIVE_OBSERVATION, "$.truncated", "false", False),
    ],
    ids=["negative-bound-to-scope-service", "negative-bound-to-scope-filter",
         "negative-bound-to-scope-window", "finding-cites-no-evidence",
         "root-cause-cites-no-evidence", "negative-not-bound-to-scope"],
)
def test_status__no_evidence_result_is_cited(
    kind: ClaimKind, path: str, matched: str, passes: bool
) -> None:
    cited = claim("c1", "No errors were logged by inventory-service",
                  binding(EMPTY_ID, "search_logs", path, matched), kind=kind)
    result = gatekeep(executor_output(cited), invocations()).result
    if passes:
        assert result.status == "pass" and result.severity is Severity.PASS
    else:
        assert result.failed_rules == [RuleId.NO_EVIDENCE_KIND]
        assert result.checked_bindings[0].rule is RuleId.NO_EVIDENCE_KIND


def test_status__no_evidence_result_is_cited_bounded_to_query_scope_by_verifier() -> None:
    scope_binding = binding(EMPTY_ID, "search_logs", "$.scope.service", "inventory-service")
    bounded = claim("c2", "No errors were logged by inventory-service between 14:00 and 15:00",
                    scope_binding, kind=ClaimKind.NEGATIVE_OBSERVATION)
    widened = claim("c3", "No errors were logged by payment-service or inventory-service",
                    scope_binding, kind=ClaimKind.NEGATIVE_OBSERVATION)
    result = run(executor_output(errors_claim(), bounded, widened))
    checks = {c.claim_id: c.verification
              for c in result.result.self_evaluation.verifier_evaluation.claim_checks}
    assert checks["c2"] is Verification.DIRECT_OBSERVATION
    assert checks["c3"] is not Verification.DIRECT_OBSERVATION


@pytest.mark.parametrize("called", ["direct_observation", "reasonable_inference"])
def test_status__an_overreaching_negative_observation_is_never_a_confirmed_finding(
        called: str) -> None:
    """Against a level:error search that found nothing, the model (scripted) calls a wider
    statement a direct observation: the post-check makes it overstated, so it is never shown
    as confirmed, and the Composer cannot publish its wider words as a finding."""
    scope_binding = binding(EMPTY_ID, "search_logs", "$.scope.service", "inventory-service")
    wide = claim("c2", "inventory-service logged nothing at all, not even warnings, so it is "
                 "healthy", scope_binding, kind=ClaimKind.NEGATIVE_OBSERVATION, critical=False)
    reply = verifier_reply("PASS", {"c1": "direct_observation", "c2": called})
    repeat = composer_reply("inventory-service logged nothing at all, not even warnings.",
                            cites=("c2",))
    result = run(executor_output(errors_claim(), wide), verifier=scripted(reply),
                 composer=scripted(repeat, repeat))
    checks = {c.claim_id: c.verification
              for c in result.result.self_evaluation.verifier_evaluation.claim_checks}
    # overstated by its scope, or contradicted outright: "healthy" is in no output it binds to
    assert checks["c2"] in (Verification.OVERSTATED, Verification.CONTRADICTED)
    answer = result.result.final_answer.user_facing_answer
    confirmed = answer.split("Possible directions")[0]
    assert "healthy" not in confirmed and "at all" not in confirmed
    assert "at all" not in result.result.final_answer.answer_summary


def test_status__errored_evidence_never_backs_a_negative_observation() -> None:
    negative = claim("c1", "No errors were logged by inventory-service",
                     binding(EMPTY_ID, "search_logs", "$.scope.service", "inventory-service"),
                     kind=ClaimKind.NEGATIVE_OBSERVATION)
    errored = empty_invocation(evidence_status=EvidenceStatus.ERROR)
    assert gatekeep(executor_output(negative), [errored]).result.severity is Severity.REJECT


def test_status__missing_evidence_status_is_refused_not_a_crash() -> None:
    negative = claim("c1", "No errors were logged by inventory-service",
                     binding(EMPTY_ID, "search_logs", "$.scope.service", "inventory-service"),
                     kind=ClaimKind.NEGATIVE_OBSERVATION)
    the_bundle = bundle(executor_output(negative), tools=[empty_invocation(evidence_status=None)])
    try:
        loaded = load_bundle(the_bundle.model_dump_json())
    except BundleError:
        return  # refusing the bundle up front is a fine fix too
    result = run(loaded)
    assert result.result.status == "FALLBACK"


# --- Requirement: Diagnosis Draft SHALL expose typed report structure -----------------------

@pytest.mark.parametrize(
    "output",
    [
        executor_output(errors_claim("c1"), rate_claim("c1")),
        executor_output(claim("c1", "pool exhausted", binding(), kind="HUNCH")),
        executor_output(claim("c1", "pool exhausted")),
        executor_output(claim("", "pool exhausted", binding())),
        executor_output(claim("c1", "pool exhausted", {"invocation_id": "toolu_01LOGS0001"})),
    ],
    ids=["duplicate-analysis-id", "unknown-analysis-kind", "no-tool-call-id",
         "empty-analysis-id", "binding-without-path"],
)
def test_draft__draft_contains_an_analysis_item(output: dict[str, Any]) -> None:
    result = gatekeep(output, invocations()).result
    assert result.failed_rules[:1] == [RuleId.SCHEMA]
    assert result.severity is Severity.REJECT


def test_draft__draft_contains_an_analysis_item_when_valid() -> None:
    outcome = gatekeep(good_output(), invocations())
    ids = [c.claim_id for c in outcome.verified_output.claims]
    assert len(ids) == len(set(ids)) == 4
    assert all(isinstance(c.kind, ClaimKind) for c in outcome.verified_output.claims)
    cited = {e.claim_id: e.invocation_id for e in outcome.verified_evidence}
    assert set(cited) == set(ids)


# --- Requirement: Safe fallback SHALL use a fixed schema ------------------------------------

def test_fallback__evidence_validation_fails_twice() -> None:
    # the bindings pass but the schema fails (duplicate id): evidence exists, none is shown
    output = executor_output(errors_claim("c1"), rate_claim("c1"))
    state, document = nodes.parse_node(PipelineState(query=QUERY), json.dumps(output))
    assert document is not None
    state = nodes.gatekeep_node(state, document, invocations())
    assert state.gatekeeper is not None and state.gatekeeper.verified_evidence
    route = Route(Node.FALLBACK, FallbackType.EVIDENCE_VALIDATION_FAILED,
                  FallbackReason.STRUCTURAL_REPAIR_FAILED)
    fallback = nodes.fallback_node(state, route).fallback
    assert fallback is not None
    assert fallback.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    assert fallback.reason is FallbackReason.STRUCTURAL_REPAIR_FAILED
    assert fallback.verified_sources == []
    shown = fallback.model_dump_json()
    assert "1432 errors" not in shown and "41.8%" not in shown
    # end to end, the same draft gives the same fixed fallback with nothing from the draft
    result = run(output)
    assert result.result.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    assert "1432" not in answer_text(result)



def test_fallback__validation_failing_after_the_one_structural_repair_says_so() -> None:
    output = executor_output(errors_claim("c1"), rate_claim("c1"))  # duplicate claim id
    problems = nodes.structural_problems(json.dumps(output))
    assert problems == ["schema.executor_v2: duplicate claim_id 'c1'"]
    assert nodes.structural_problems("not json")[0].startswith("not an executor_evidence_v2")
    assert nodes.structural_problems(json.dumps(good_output())) == []
    # routing: before the repair the reason is the first failure; after it, the repair's
    first = routing.after_execute(StageStatus.INVALID_OUTPUT)
    again = routing.after_execute(StageStatus.INVALID_OUTPUT, repaired=True)
    assert (first.fallback_type, first.reason) == (
        FallbackType.EVIDENCE_VALIDATION_FAILED, FallbackReason.EXECUTOR_INVALID_OUTPUT)
    assert (again.fallback_type, again.reason) == (
        FallbackType.EVIDENCE_VALIDATION_FAILED, FallbackReason.STRUCTURAL_REPAIR_FAILED)
    assert routing.after_execute(StageStatus.OK, repaired=True).node is Node.GATEKEEP
    rejected = routing.after_gatekeep(Severity.REJECT, repair_failed=True)
    assert rejected.reason is FallbackReason.STRUCTURAL_REPAIR_FAILED
    assert routing.after_gatekeep(Severity.REJECT).reason is FallbackReason.GATEKEEPER_REJECT
    assert routing.after_gatekeep(Severity.PASS, repair_failed=True).node is Node.VERIFY


def test_fallback__fallback_excludes_internal_errors() -> None:
    secret = "upstream 529 from gw-7 at 10.1.2.3: overloaded_error req_abc123"
    result = run(good_output(), verifier=scripted(ProviderUnavailableError(secret),
                                                  ProviderUnavailableError(secret)))
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert secret not in result.result.model_dump_json()
    assert "req_abc123" not in answer_text(result)


# --- Requirement: Retry attempts SHALL be owned by Harness ----------------------------------

def test_retry__semantic_guard_returns_an_invalid_schema() -> None:
    invalid = json.dumps({"verdict": "PASS", "claim_checks": "all good"})
    verifier = scripted(invalid, verifier_reply("PASS", ALL_DIRECT), verifier_reply("REJECT", {}))
    result = run(executor_output(errors_claim(), rate_claim()), verifier=verifier)
    assert len(verifier.calls) == 2 and len(verifier.replies) == 1  # one retry, no more
    assert verifier.calls[0][1] == verifier.calls[1][1]
    rows = [a for a in result.attempts if a.role == "verifier"]
    assert [(a.attempt_number, a.outcome) for a in rows] == [(1, "invalid_output"), (2, "ok")]
    assert rows[0].input_sha256 == rows[1].input_sha256
    assert rows[0].prompt_name == rows[1].prompt_name == "verity.verifier"
    assert result.result.verdict is Verdict.PASS
    snapshot = json.loads(verifier.calls[1][1])["verified_evidence"]
    persisted = result.result.self_evaluation.verifier_evaluation.verified_evidence
    assert snapshot == [e.model_dump(mode="json") for e in persisted]


def test_retry__semantic_guard_invalid_twice_is_not_retried_a_third_time() -> None:
    verifier = scripted("{", "{", verifier_reply("PASS", ALL_DIRECT))
    result = run(executor_output(errors_claim(), rate_claim()), verifier=verifier)
    assert len(verifier.calls) == 2
    assert [a.outcome for a in result.attempts] == ["invalid_output", "invalid_output"]
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
