"""spec/verifier-gatekeeper-routing.md: one test per deterministic scenario.

Each test is named `test_<requirement>__<scenario>`. The Verifier and Composer are the offline
agents or Scripted doubles; every payload a model received is inspected as bytes.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from models.common import FallbackType, Verdict
from models.evaluation import TRACEABILITY_VERSION, StageStatus, VerifierStatus
from models.executor import ClaimKind, ClaimStatus
from models.fallback import FallbackReason
from models.gatekeeper import RuleId, Severity
from models.invocation import LifecycleStatus
from models.state import PipelineState
from models.verifier import FactClass, RetryContext, Verification, VerifierOutput
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.errors import (
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
)
from pipeline.prompts import load_prompt
from pipeline.rules import routing
from pipeline.rules.gatekeeper import gatekeep
from pipeline.rules.rendering import NO_RELIABLE_CONCLUSION
from pipeline.rules.routing import Node
from pipeline.rules.verdict import FACT_CLASS, effective_verdict, facts_checked, rule_verdict
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.run import nodes
from pipeline.run.evaluation import verifier_evaluation
from pipeline.run.nodes import gatekeep as gatekeep_step

from .helpers import (
    DEPLOYS_ID,
    LOG_500,
    LOG_TIMEOUT,
    LOGS_ID,
    METRICS_ID,
    QUERY,
    RATE_SUMMARY,
    ROOT_TEXT,
    UNBOUND_LOG,
    answer_text,
    assert_published,
    binding,
    bundle,
    check,
    claim,
    composer_reply,
    deploy_claim,
    errors_claim,
    executor_output,
    gap,
    good_output,
    invocation,
    invocations,
    logs_invocation,
    rate_claim,
    root_claim,
    run,
    scripted,
    verified_claim,
    verifier_reply,
)

ALL_DIRECT = {"c1": "direct_observation", "c2": "direct_observation",
              "c3": "direct_observation", "c4": "reasonable_inference"}


def fabricated_claim(claim_id: str = "c9") -> dict[str, Any]:
    """A claim whose only binding cites an invocation that never ran."""
    return claim(claim_id, "redis-cache evicted 9000 keys before the outage",
                 binding("toolu_01FAKE9999", "search_logs"))


def payload_of(model: Any) -> dict[str, Any]:
    """The single payload a Scripted received, decoded."""
    assert len(model.calls) >= 1
    return dict(json.loads(model.calls[0][1]))


def evaluation_of(result: Any) -> Any:
    return result.result.self_evaluation.verifier_evaluation


# --- Requirement: Verifier SHALL fact-check Executor answers --------------------------------

def test_verifier_fact_check__pass_verdict_when_all_claims_have_evidence() -> None:
    claims = [verified_claim("c1", "a"), verified_claim("c2", "b")]
    checks = [check("c1", Verification.DIRECT_OBSERVATION),
              check("c2", Verification.REASONABLE_INFERENCE)]
    assert rule_verdict(claims, checks) is Verdict.PASS
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks, ceiling=Verdict.PASS,
                             groundedness_score=0.5) is Verdict.PASS
    # groundedness below 0.5 never yields PASS
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks, ceiling=Verdict.PASS,
                             groundedness_score=0.49) is Verdict.LOW_CONFID
    # end to end: the offline Verifier reaches PASS on fully supported claims
    result = run(good_output())
    assert result.result.verdict is Verdict.PASS
    assert evaluation_of(result).groundedness_score >= 0.5


@pytest.mark.parametrize(
    "weak",
    [Verification.UNSUPPORTED, Verification.EXTERNAL_UNKNOWN, Verification.OVERSTATED],
    ids=["partial-evidence-unsupported", "partial-evidence-external-unknown",
         "partial-evidence-overstated"],
)
def test_verifier_fact_check__low_confid_verdict_with_partial_evidence(
    weak: Verification,
) -> None:
    claims = [verified_claim("c1", "a"), verified_claim("c2", "b")]
    checks = [check("c1", Verification.DIRECT_OBSERVATION), check("c2", weak)]
    assert rule_verdict(claims, checks) is Verdict.LOW_CONFID
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks, ceiling=Verdict.PASS,
                             groundedness_score=1.0) is Verdict.LOW_CONFID


def test_verifier_fact_check__low_confid_verdict_with_only_inference_support() -> None:
    claims = [verified_claim("c1", "a"), verified_claim("c2", "b", kind=ClaimKind.ROOT_CAUSE)]
    checks = [check("c1", Verification.REASONABLE_INFERENCE),
              check("c2", Verification.REASONABLE_INFERENCE)]
    assert rule_verdict(claims, checks) is Verdict.LOW_CONFID
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks, ceiling=Verdict.PASS,
                             groundedness_score=1.0) is Verdict.LOW_CONFID


def test_verifier_fact_check__reject_verdict_when_claims_contradict_evidence() -> None:
    claims = [verified_claim("c1", "a"), verified_claim("c2", "b")]
    checks = [check("c1", Verification.DIRECT_OBSERVATION),
              check("c2", Verification.CONTRADICTED)]
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks, ceiling=Verdict.PASS,
                             groundedness_score=1.0) is Verdict.REJECT
    # a claim fabricating an error code its evidence never states is contradicted: REJECT
    fabricated = claim("c5", "payment-db refused connections with ECONNREFUSED",
                       binding(matched_text="payment-db connection pool exhausted"))
    result = run(executor_output(errors_claim(), fabricated))
    checks_by_id = {c.claim_id: c.verification for c in evaluation_of(result).claim_checks}
    assert checks_by_id["c5"] is Verification.CONTRADICTED
    assert result.result.verdict is Verdict.REJECT
    assert evaluation_of(result).model_verdict is Verdict.REJECT


@pytest.mark.parametrize("called", ["reasonable_inference", "direct_observation", "overstated"])
def test_verifier_fact_check__a_fabrication_is_rejected_whatever_the_model_calls_it(
        called: str) -> None:
    """The model (scripted) calls a claim that invents an error code and an entity anything but
    fabricated; the post-check makes it contradicted, REJECT follows, and no field of the
    answer repeats it, even when the Composer does."""
    fabricated = claim("c5", "payment-db refused connections with ECONNREFUSED from "
                       "pgbouncer-17", binding(matched_text="payment-db connection pool exhausted"))
    reply = verifier_reply("PASS", {"c1": "direct_observation", "c5": called})
    repeat = composer_reply(
        "payment-db refused connections with ECONNREFUSED from pgbouncer-17.",
        cites=("c5",))
    result = run(executor_output(errors_claim(), fabricated), verifier=scripted(reply),
                 composer=scripted(repeat, repeat))
    checks_by_id = {c.claim_id: c.verification for c in evaluation_of(result).claim_checks}
    assert checks_by_id["c5"] is Verification.CONTRADICTED
    assert result.result.verdict is Verdict.REJECT
    shown = answer_text(result)
    assert "ECONNREFUSED" not in shown and "pgbouncer" not in shown


@pytest.mark.parametrize("called", ["reasonable_inference", "direct_observation"])
def test_verifier_fact_check__a_conclusion_no_output_states_is_never_confirmed(
        called: str) -> None:
    """A root cause worded beyond every output it binds to ("a memory leak in the product
    cache" read from pool errors) is a conclusion that does not exist in the verified
    evidence: whatever the model calls it, it is not confirmed, the verdict is not PASS, and
    no field of the answer repeats it, even when the Composer does."""
    invented = claim("c5", "A memory leak in the product cache exhausted the payment-db "
                     "connection pool",
                     binding(matched_text="payment-db connection pool exhausted"),
                     kind=ClaimKind.ROOT_CAUSE)
    reply = verifier_reply("PASS", {"c1": "direct_observation", "c5": called})
    repeat = composer_reply("A memory leak in the product cache exhausted the payment-db "
                            "connection pool.", cites=("c5",))
    result = run(executor_output(errors_claim(), invented), verifier=scripted(reply),
                 composer=scripted(repeat, repeat))
    checks_by_id = {c.claim_id: c.verification for c in evaluation_of(result).claim_checks}
    assert checks_by_id["c5"] in (Verification.OVERSTATED, Verification.CONTRADICTED)
    assert result.result.verdict is not Verdict.PASS
    shown = answer_text(result).casefold()
    assert "memory leak" not in shown and "product cache" not in shown


def test_verifier_fact_check__verified_structured_claims_are_the_only_verification_target() -> None:
    verifier = scripted(verifier_reply("PASS", {
        "c1": "direct_observation", "c2": "direct_observation", "c9": "direct_observation",
    }))
    output = executor_output(
        errors_claim(),
        claim("c2", "checkout-service rejected 77 requests with HTTP 429",
              binding(path="$.hits[1].message", matched_text="timeout after 5000ms")),
        fabricated_claim(),
        hypotheses=[{"text": "A noisy neighbour starved payment-db", "claim_ids": ["c1"]}],
    )
    result = run(output, verifier=verifier, composer=scripted(composer_reply()))
    sent = payload_of(verifier)
    # the Verifier's target is exactly the verified structured claims
    assert [c["claim_id"] for c in sent["verified_executor_output"]["claims"]] == ["c1", "c2"]
    assert "A noisy neighbour" not in verifier.calls[0][1].decode()
    checks = {c.claim_id: c for c in evaluation_of(result).claim_checks}
    # a check of a claim the Verifier never received is dropped
    assert set(checks) == {"c1", "c2"}
    # c2's facts (77 requests, HTTP 429) are not in its evidence: not direct_observation
    assert checks["c2"].verification is not Verification.DIRECT_OBSERVATION
    assert checks["c1"].verification is Verification.DIRECT_OBSERVATION


@pytest.mark.parametrize(
    "raw",
    ["not json at all", "```json\n{\"claims\": []}\n```", "[]", "{\"claims\": {}}"],
    ids=["plain-text", "markdown-fenced", "json-array", "claims-not-a-list"],
)
def test_verifier_fact_check__executor_output_is_invalid(raw: str) -> None:
    verifier, composer = scripted(), scripted()
    result = run(bundle(raw), verifier=verifier, composer=composer)
    assert verifier.calls == [] and composer.calls == []
    assert result.result.status == "FALLBACK"
    assert result.result.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    assert result.result.verdict is None
    evaluation = evaluation_of(result)
    assert evaluation.model_verdict is None and evaluation.effective_verdict is None
    assert evaluation.verifier_status is VerifierStatus.NOT_RUN
    assert result.attempts == []


# --- Requirement: facts_checked SHALL use a fixed classification set ------------------------

@pytest.mark.parametrize(
    ("verification", "expected"),
    [
        (Verification.DIRECT_OBSERVATION, FactClass.DIRECT_EVIDENCE),
        (Verification.REASONABLE_INFERENCE, FactClass.INDIRECT_SUPPORT),
        (Verification.OVERSTATED, FactClass.INDIRECT_SUPPORT),
        (Verification.UNSUPPORTED, FactClass.NO_EVIDENCE),
        (Verification.EXTERNAL_UNKNOWN, FactClass.NO_EVIDENCE),
        (Verification.CONTRADICTED, FactClass.CONTRADICTED),
    ],
    ids=lambda v: str(v),
)
def test_facts_checked__claim_checks_are_mapped_to_legacy_facts(
    verification: Verification, expected: FactClass
) -> None:
    assert FACT_CLASS[verification] is expected
    derived = facts_checked([check("c1", verification)])
    assert [(f.claim_id, f.classification) for f in derived] == [("c1", expected)]


def test_facts_checked__claim_checks_are_mapped_to_legacy_facts_when_model_omits_them() -> None:
    reply = verifier_reply("LOW_CONFID", {"c1": "direct_observation", "c2": "overstated",
                                          "c3": "unsupported", "c4": "reasonable_inference"})
    evaluation = evaluation_of(run(good_output(), verifier=scripted(reply)))
    assert [(f.claim_id, f.classification) for f in evaluation.facts_checked] == [
        ("c1", FactClass.DIRECT_EVIDENCE), ("c2", FactClass.INDIRECT_SUPPORT),
        ("c3", FactClass.NO_EVIDENCE), ("c4", FactClass.INDIRECT_SUPPORT),
    ]


def test_facts_checked__claim_checks_are_mapped_to_legacy_facts_after_the_post_check() -> None:
    # the model's own facts_checked name an unverified claim and a claim the post-check
    # downgrades: the persisted compatibility view follows the post-checked claim checks
    reply = verifier_reply(
        "PASS", {"c1": "direct_observation", "c2": "direct_observation"},
        facts_checked=[{"claim_id": "c1", "classification": "direct_evidence"},
                       {"claim_id": "c2", "classification": "direct_evidence"},
                       {"claim_id": "c77", "classification": "direct_evidence"}])
    fabricated = claim("c2", "checkout-service logged 1432 errors from 12 pods",
                       binding(path="$.total", matched_text="1432"))
    evaluation = evaluation_of(run(executor_output(errors_claim(), fabricated),
                                   verifier=scripted(reply), composer=scripted(composer_reply())))
    assert [(c.claim_id, c.verification) for c in evaluation.claim_checks] == [
        ("c1", Verification.DIRECT_OBSERVATION), ("c2", Verification.CONTRADICTED)]
    assert [(f.claim_id, f.classification) for f in evaluation.facts_checked] == [
        ("c1", FactClass.DIRECT_EVIDENCE), ("c2", FactClass.CONTRADICTED)]


# --- Requirement: ChatService SHALL route based on Verifier verdict -------------------------

def test_routing__pass_routes_to_composer() -> None:
    route = routing.after_verify(verifier_status=VerifierStatus.COMPLETED, verdict=Verdict.PASS,
                                 ceiling=Verdict.PASS, valid_gaps=[gap("c1")],
                                 evidence_retry_count=0)
    assert route.node is Node.COMPOSE
    marker = "Executor draft says the outage is over"
    composer = scripted(composer_reply())
    output = good_output(hypotheses=[{"text": marker, "claim_ids": []}])
    result = run(output, composer=composer)
    assert result.result.status == "SUCCESS" and result.result.verdict is Verdict.PASS
    sent = composer.calls[0][1].decode()
    assert marker not in sent and "evidence_bindings" not in sent
    assert_published(result.result.final_answer, composer_reply())


@pytest.mark.parametrize(
    ("ceiling", "gaps", "retries"),
    [
        (Verdict.LOW_CONFID, [gap("c1")], 0),
        (Verdict.PASS, [], 0),
        (Verdict.PASS, [gap("c1", critical=False)], 0),
        (Verdict.PASS, [gap("c7")], 0),
        (Verdict.PASS, [gap("c1", tool="delete_cluster")], 0),
        (Verdict.PASS, [gap("c1")], 1),
    ],
    ids=["ceiling-low-confid", "no-gap", "gap-not-critical", "gap-about-unverified-claim",
         "gap-names-unknown-tool", "retry-already-used"],
)
def test_routing__low_confid_does_not_qualify_for_evidence_retry(
    ceiling: Verdict, gaps: list[Any], retries: int
) -> None:
    valid = routing.valid_critical_gaps(gaps, verified_claim_ids={"c1", "c2"},
                                        known_tools={"search_logs", "query_metrics"})
    route = routing.after_verify(verifier_status=VerifierStatus.COMPLETED,
                                 verdict=Verdict.LOW_CONFID, ceiling=ceiling, valid_gaps=valid,
                                 evidence_retry_count=retries)
    assert route == routing.Route(Node.COMPOSE)


def test_routing__low_confid_does_not_qualify_answer_separates_confirmed_directions_gaps() -> None:
    reply = verifier_reply("LOW_CONFID", {**ALL_DIRECT, "c2": "overstated"},
                           gaps=[{"claim_id": "c2", "critical": True,
                                  "description": "The 5xx peak time is unverified."}])
    answer = run(good_output(), verifier=scripted(reply)).result.final_answer.user_facing_answer
    confirmed, _, rest = answer.partition("Possible directions (not confirmed):")
    directions, _, gaps = rest.partition("Evidence gaps:")
    assert "Confirmed information:" in confirmed and "1432 errors" in confirmed
    assert "0.2% baseline" in directions and "0.2% baseline" not in confirmed
    assert "The 5xx peak time is unverified." in gaps


def test_routing__low_confid_qualifies_for_evidence_retry() -> None:
    valid = routing.valid_critical_gaps([gap("c1", tool="search_logs")],
                                        verified_claim_ids={"c1"}, known_tools={"search_logs"})
    assert valid
    route = routing.after_verify(verifier_status=VerifierStatus.COMPLETED,
                                 verdict=Verdict.LOW_CONFID, ceiling=Verdict.PASS,
                                 valid_gaps=valid, evidence_retry_count=0)
    assert route.node is Node.PLAN and route.evidence_gap_only is True
    # the decision takes no groundedness score and no feature flag
    params = set(inspect.signature(routing.after_verify).parameters)
    assert not {p for p in params if "ground" in p or "flag" in p or "feature" in p}


def test_routing__reject_does_not_enter_retry_round() -> None:
    route = routing.after_verify(verifier_status=VerifierStatus.COMPLETED, verdict=Verdict.REJECT,
                                 ceiling=Verdict.PASS, valid_gaps=[gap("c1")],
                                 evidence_retry_count=0)
    assert route.node is Node.FALLBACK and not route.evidence_gap_only
    assert route.fallback_type is FallbackType.SEMANTIC_UNSUPPORTED
    assert not routing.evidence_retry_eligible(verdict=Verdict.REJECT, ceiling=Verdict.PASS,
                                               valid_gaps=[gap("c1")], evidence_retry_count=0)


def test_routing__reject_produces_bounded_output() -> None:
    contradicted = claim("c5", "checkout-service v2.4.0 was deployed at 14:02",
                         binding(DEPLOYS_ID, "list_deployments", "$.deployments[0].version",
                                 "v2.3.1"))
    composer = scripted()
    result = run(executor_output(errors_claim(), contradicted, root_claim()), composer=composer)
    assert result.result.verdict is Verdict.REJECT
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNSUPPORTED
    assert composer.calls == []
    answer = result.result.final_answer
    assert answer.answer_summary == NO_RELIABLE_CONCLUSION
    assert NO_RELIABLE_CONCLUSION in answer.user_facing_answer
    assert ROOT_TEXT not in answer.user_facing_answer
    assert "Root cause" not in answer.user_facing_answer
    assert "v2.4.0" not in answer.model_dump_json()


@pytest.mark.parametrize(
    "failure",
    [[ProviderUnavailableError("529"), ProviderUnavailableError("529")],
     [ProviderRejectedError("HTTP 400 invalid request")]],
    ids=["exhausts-technical-retry", "non-retryable-failure"],
)
def test_routing__verifier_execution_fails(failure: list[Exception]) -> None:
    verifier, composer = scripted(*failure), scripted()
    result = run(good_output(), verifier=verifier, composer=composer)
    assert len(verifier.calls) == len(failure) and composer.calls == []
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert result.result.verdict is None
    evaluation = evaluation_of(result)
    assert evaluation.verifier_status is VerifierStatus.FAILED
    assert evaluation.model_verdict is None and evaluation.effective_verdict is None
    assert evaluation.verdict is None
    assert evaluation.failure_reason is FallbackReason.VERIFIER_UNAVAILABLE
    assert [a.outcome for a in result.attempts][-1] in {"unavailable", "rejected"}
    # no execution status string stands in for a verdict
    route = routing.after_verify(verifier_status=VerifierStatus.FAILED, verdict=None,
                                 ceiling=Verdict.PASS, valid_gaps=[], evidence_retry_count=0)
    assert route.node is Node.FALLBACK


# --- Requirement: Verifier SHALL be observable ----------------------------------------------

def test_observable__claim_checks_written_to_self_evaluation() -> None:
    dump = evaluation_of(run(good_output())).model_dump(mode="json")
    for key in ("claim_checks", "facts_checked", "verifier_status", "model_verdict",
                "effective_verdict", "verdict", "groundedness_score", "rationale",
                "executor_structured_output", "verified_evidence", "gatekeeper_result"):
        assert dump[key] not in (None, [], ""), key
    assert [c["claim_id"] for c in dump["claim_checks"]] == ["c1", "c2", "c3", "c4"]
    assert all("evidence_refs" in c for c in dump["claim_checks"])
    assert dump["verifier_status"] == "COMPLETED"


def test_observable__composer_output_written_to_self_evaluation() -> None:
    ok = evaluation_of(run(good_output()))
    assert ok.composer_status is StageStatus.OK and ok.composer_output is not None
    assert ok.composer_output.user_facing_answer.startswith("Question:")
    failed = run(good_output(), composer=scripted("not json", "still not json"))
    evaluation = evaluation_of(failed)
    assert evaluation.composer_status is StageStatus.FAILED and evaluation.composer_output is None
    assert evaluation.failure_stage == "compose"
    assert evaluation.failure_reason is FallbackReason.COMPOSER_UNAVAILABLE
    assert ("fallback", "completed") in [(node, kind) for node, kind, _ in failed.events]
    assert ("compose", "completed", {"composer_status": StageStatus.FAILED.value,
                                     "route": "fallback"}) in failed.events
    # claim/fact and Gatekeeper fields are preserved beside the failed composition
    assert evaluation.claim_checks and evaluation.facts_checked
    assert evaluation.gatekeeper_result is not None


def test_observable__verdict_written_to_self_evaluation() -> None:
    # model says PASS; the LOW_CONFID ceiling (one fabricated binding) makes it LOW_CONFID
    output = executor_output(errors_claim(), rate_claim(), fabricated_claim())
    result = run(output, verifier=scripted(verifier_reply("PASS", {"c1": "direct_observation",
                                                                    "c2": "direct_observation"})),
                 composer=scripted(composer_reply()))
    evaluation = evaluation_of(result)
    assert evaluation.model_verdict is Verdict.PASS
    assert evaluation.effective_verdict is Verdict.LOW_CONFID
    assert evaluation.verdict is Verdict.LOW_CONFID
    assert result.result.verdict is Verdict.LOW_CONFID
    self_evaluation = result.result.self_evaluation
    assert self_evaluation.rule_evaluation["verdict_ceiling"] == "LOW_CONFID"
    assert self_evaluation.rule_evaluation["failed_rules"] == ["evidence.invocation_ref"]
    assert self_evaluation.aiops_rule_evaluation["invocations"] == len(invocations())


@pytest.mark.parametrize(
    ("output", "stage", "reason"),
    [
        ("{\"claims\": ", "execute", FallbackReason.EXECUTOR_INVALID_OUTPUT),
        (executor_output(fabricated_claim()), "gatekeep", FallbackReason.GATEKEEPER_REJECT),
    ],
    ids=["executor-invalid-output", "gatekeeper-reject"],
)
def test_observable__pre_verification_fallback_is_persisted(
    output: Any, stage: str, reason: FallbackReason
) -> None:
    result = run(output, verifier=scripted())
    evaluation = evaluation_of(result)
    assert evaluation.verifier_status is VerifierStatus.NOT_RUN
    assert evaluation.failure_stage == stage and evaluation.failure_reason is reason
    assert evaluation.prompt_audit.prompts
    assert evaluation.model_verdict is None and evaluation.effective_verdict is None
    assert evaluation.verdict is None
    if stage == "gatekeep":
        assert evaluation.gatekeeper_result is not None
        assert evaluation.gatekeeper_result.severity is Severity.REJECT
    else:
        assert evaluation.executor_status is StageStatus.INVALID_OUTPUT


def test_observable__gatekeeper_result_written_to_self_evaluation() -> None:
    output = executor_output(errors_claim(), fabricated_claim())
    outcome = gatekeep(output, invocations())
    stored = evaluation_of(run(output)).gatekeeper_result
    assert stored == outcome.result
    assert stored.status == "fail" and stored.severity is Severity.LOW_CONFID
    assert [r.rule for r in stored.rules] == list(RuleId)
    assert stored.failed_rules == [RuleId.INVOCATION_REF]
    assert [(b.claim_id, b.status) for b in stored.checked_bindings] == [
        ("c1", "pass"), ("c1", "pass"), ("c9", "fail")]
    assert len(stored.errors) == 1 and "c9" in stored.errors[0]


def test_observable__prompt_audit_written_to_verifier_evaluation() -> None:
    result = run(good_output())
    audit = evaluation_of(result).prompt_audit
    assert audit.version.startswith("verity.prompts.")
    assert {p.role: p.name for p in audit.prompts} == {
        "planner": "verity.planner", "executor": "verity.executor",
        "verifier": "verity.verifier", "composer": "verity.composer"}
    assert all(p.version for p in audit.prompts)
    persisted = result.result.self_evaluation.model_dump_json()
    for role in ("planner", "executor", "verifier", "composer"):
        text = load_prompt(role).text
        assert text[:80] not in persisted and text.splitlines()[0] not in persisted


@pytest.mark.parametrize(
    ("output", "verifier", "composer", "expected"),
    [
        ("oops", None, None, FallbackType.EVIDENCE_VALIDATION_FAILED),
        (executor_output(fabricated_claim()), None, None, FallbackType.EVIDENCE_VALIDATION_FAILED),
        (good_output(), [ProviderUnavailableError("x")] * 2, None,
         FallbackType.SEMANTIC_UNAVAILABLE),
        (good_output(), [verifier_reply("REJECT", {"c1": "contradicted"})], None,
         FallbackType.SEMANTIC_UNSUPPORTED),
        (good_output(), None, ["{}", "{}"], FallbackType.SEMANTIC_UNAVAILABLE),
    ],
    ids=["executor-fallback", "gatekeeper-fallback", "verifier-unavailable", "verifier-reject",
         "composer-unavailable"],
)
def test_observable__prompt_audit_available_on_fallback_paths(
    output: Any, verifier: Any, composer: Any, expected: FallbackType
) -> None:
    result = run(output, verifier=scripted(*verifier) if verifier else None,
                 composer=scripted(*composer) if composer else None)
    assert result.result.fallback_type is expected
    audit = evaluation_of(result).prompt_audit
    assert sorted(p.role for p in audit.prompts) == ["composer", "executor", "planner",
                                                      "verifier"]


def test_observable__evaluation_payload_is_inspected() -> None:
    fabricated = fabricated_claim()
    output = executor_output(errors_claim(), rate_claim(), fabricated)
    the_bundle = bundle(output)
    result = run(the_bundle)
    persisted = result.result.self_evaluation.model_dump_json()
    assert the_bundle.executor_output_raw not in persisted
    assert fabricated["text"] not in persisted
    assert UNBOUND_LOG not in persisted and LOG_TIMEOUT not in persisted
    assert "evidence_bindings" not in persisted and "projection" not in persisted
    structured = evaluation_of(result).executor_structured_output
    assert structured == gatekeep(output, the_bundle.invocations).verified_output
    assert [c.claim_id for c in structured.claims] == ["c1", "c2"]


# --- Requirement: Verifier SHALL consume explicit verification inputs -----------------------

BLOCKS = {"diagnosis_context", "verified_executor_output", "verified_evidence",
          "gatekeeper_audit", "verdict_ceiling", "retry_context"}


def test_inputs__explicit_input_blocks_available_to_verifier() -> None:
    verifier = scripted(verifier_reply("PASS", ALL_DIRECT))
    run(good_output(), verifier=verifier)
    sent = payload_of(verifier)
    assert set(sent) == BLOCKS
    assert sent["diagnosis_context"] == {"query": QUERY, "intent": "DIAGNOSIS"}
    assert sent["verdict_ceiling"] == "PASS"
    assert sent["retry_context"] is None  # only after an evidence-retry preparation
    retried = scripted(verifier_reply("PASS", ALL_DIRECT))
    context = RetryContext(evidence_retry_count=1, previous_gaps=["pool utilization"])
    result = run(bundle(good_output(), retry_context=context), verifier=retried)
    assert payload_of(retried)["retry_context"] == context.model_dump(mode="json")
    assert {a.cycle for a in result.attempts} == {1}


def test_inputs__verifier_remains_isolated_from_intermediate_and_raw_material() -> None:
    verifier = scripted(verifier_reply("PASS", ALL_DIRECT))
    output = good_output(missing_info=["Planner thought: compare with last week"])
    the_bundle = bundle(output)
    run(the_bundle, verifier=verifier)
    sent = verifier.calls[0][1].decode()
    assert the_bundle.executor_output_raw not in sent
    for excluded in ("Planner thought", "Traffic at 14:07 exceeded",  # missing_info, hypothesis
                     "Restore the payment-db connection pool",         # recommended action
                     UNBOUND_LOG, LOG_TIMEOUT,                          # unreferenced tool output
                     "evidence_bindings", "hypotheses", "arguments", "tool_trace",
                     load_prompt("verifier").text[:60]):
        assert excluded not in sent, excluded


def test_inputs__only_passed_bindings_are_available() -> None:
    mixed = claim("c5", "checkout-service logged 1432 errors",
                  binding(path="$.total", matched_text="1432"),
                  binding(path="$.hits[2].message", matched_text="pool exhausted"))  # not there
    output = executor_output(mixed, rate_claim(), fabricated_claim())
    verifier = scripted(verifier_reply("PASS", {"c5": "direct_observation",
                                                "c2": "direct_observation"}))
    run(output, verifier=verifier, composer=scripted(composer_reply(
        "checkout-service logged 1432 errors.", cites=("c5",))))
    sent = payload_of(verifier)
    assert [c["claim_id"] for c in sent["verified_executor_output"]["claims"]] == ["c5", "c2"]
    assert [(e["claim_id"], e["path"]) for e in sent["verified_evidence"]] == [
        ("c5", "$.total"), ("c2", "$['series'][0]['summary']")]
    raw = verifier.calls[0][1].decode()
    assert "$.hits[2].message" not in raw and "toolu_01FAKE9999" not in raw
    assert UNBOUND_LOG not in raw


def test_inputs__verified_evidence_preserves_precise_references() -> None:
    output = executor_output(rate_claim(), errors_claim())
    outcome = gatekeep(output, invocations())
    payload = build_verifier_input(outcome, query=QUERY)
    items = [(e.evidence_id, e.claim_id, e.invocation_id, e.tool_name, e.path, e.matched_text)
             for e in payload.verified_evidence]
    assert items == [
        ("E1", "c2", METRICS_ID, "query_metrics", "$['series'][0]['summary']", RATE_SUMMARY),
        ("E2", "c1", LOGS_ID, "search_logs", "$.total", "1432"),
        ("E3", "c1", LOGS_ID, "search_logs", "$.hits[0].message",
         "POST /api/checkout 500 Internal Server Error"),
    ]
    passed = {(b.claim_id, b.invocation_id, b.path) for b in outcome.result.checked_bindings
              if b.status == "pass"}
    assert {(e.claim_id, e.invocation_id, e.path) for e in payload.verified_evidence} == passed


def test_inputs__gatekeeper_audit_and_ceiling_are_available() -> None:
    output = executor_output(errors_claim(), rate_claim(), fabricated_claim())
    verifier = scripted(verifier_reply("PASS", {"c1": "direct_observation",
                                                "c2": "direct_observation"}, groundedness=1.0))
    result = run(output, verifier=verifier, composer=scripted(composer_reply()))
    sent = payload_of(verifier)
    assert sent["gatekeeper_audit"] == {
        "status": "fail", "severity": "low_confid", "failed_rules": ["evidence.invocation_ref"],
        "checked_bindings": 4, "passed_bindings": 3, "warnings": []}
    assert sent["verdict_ceiling"] == "LOW_CONFID"
    assert result.result.verdict is Verdict.LOW_CONFID


@pytest.mark.parametrize(
    "first",
    ["{not json", verifier_reply("MAYBE", {}), ProviderUnavailableError("timeout"),
     ProviderOutputInvalidError("refusal")],
    ids=["invalid-json", "schema-invalid-verdict", "retryable-unavailable",
         "provider-output-invalid"],
)
def test_inputs__technical_retry_occurs(
    first: str | Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    gatekeeper_runs: list[int] = []
    real_gatekeep = gatekeep_step.gatekeep

    def counting_gatekeep(*args: Any, **kwargs: Any) -> Any:
        gatekeeper_runs.append(1)
        return real_gatekeep(*args, **kwargs)

    monkeypatch.setattr(gatekeep_step, "gatekeep", counting_gatekeep)
    verifier = scripted(first, verifier_reply("PASS", ALL_DIRECT))
    tools = invocations()
    result = run(good_output(), verifier=verifier, tools=tools)
    assert len(verifier.calls) == 2
    assert verifier.calls[0][1] == verifier.calls[1][1]  # byte-identical input
    rows = [a for a in result.attempts if a.role == "verifier"]
    assert [a.attempt_number for a in rows] == [1, 2]
    assert rows[0].input_sha256 == rows[1].input_sha256
    assert rows[0].outcome != "ok" and rows[1].outcome == "ok"
    assert gatekeeper_runs == [1]
    assert result.result.self_evaluation.aiops_rule_evaluation["invocations"] == len(tools)
    assert result.result.verdict is Verdict.PASS


# --- Requirement: Verifier facts SHALL be auditable -----------------------------------------

def test_auditable__claim_checks_contain_evidence_refs() -> None:
    output = executor_output(errors_claim(), rate_claim(), fabricated_claim())
    refs = ["E1", "c1", LOGS_ID, "search_logs", "$.total",       # verified references
            "toolu_01FAKE9999", "c9", "$.hits[2].message", "E99"]  # unverified material
    reply = verifier_reply("LOW_CONFID", [
        {"claim_id": "c1", "verification": "direct_observation", "evidence_refs": refs},
        {"claim_id": "c2", "verification": "reasonable_inference"}])
    evaluation = evaluation_of(run(output, verifier=scripted(reply),
                                   composer=scripted(composer_reply())))
    checks = {c.claim_id: c for c in evaluation.claim_checks}
    assert checks["c1"].evidence_refs == refs[:5]
    assert checks["c2"].evidence_refs == []  # an evidence_refs array on every check
    verified = evaluation.verified_evidence
    known = {v for e in verified for v in (e.evidence_id, e.claim_id, e.invocation_id,
                                           e.tool_name, e.path)}
    assert all(ref in known for c in evaluation.claim_checks for ref in c.evidence_refs)
    assert any("evidence refs to unverified material removed" in d
               for d in evaluation.downgrades)


def test_auditable__verifier_evaluation_persists_traceability_snapshot() -> None:
    verifier = scripted(verifier_reply("PASS", ALL_DIRECT))
    result = run(good_output(), verifier=verifier)
    evaluation = evaluation_of(result)
    assert evaluation.traceability_version == TRACEABILITY_VERSION
    sent = payload_of(verifier)
    assert [e.model_dump(mode="json") for e in evaluation.verified_evidence] == (
        sent["verified_evidence"])
    persisted = result.result.self_evaluation.model_dump_json()
    assert "tool_trace" not in persisted and UNBOUND_LOG not in persisted


# --- Requirement: Structured Executor output SHALL degrade safely ---------------------------

@pytest.mark.parametrize(
    ("raw", "failure"),
    [
        ("The pool is exhausted.", "not_json"),
        ("Here you go: {\"claims\": []}", "not_json"),
        ("```json\n{\"claims\": []}\n```", "not_json"),
        ("[{\"claims\": []}]", "not_an_object"),
        ("{\"claims\": [], \"claims\": []}", "duplicate_key"),
        ("{\"findings\": []}", "missing_claims"),
        ("{\"claims\": [\"c1\"]}", "claims_not_objects"),
    ],
    ids=["prose", "text-around-json", "markdown-fence", "array", "duplicate-key",
         "no-claims-array", "claims-not-objects"],
)
def test_degrade__malformed_executor_json_is_classified(raw: str, failure: str) -> None:
    verifier, composer = scripted(), scripted()
    state, document = nodes.parse_node(PipelineState(query=QUERY), raw)
    assert document is None and state.executor_status is StageStatus.INVALID_OUTPUT
    assert state.parse_failure == failure
    assert routing.after_execute(state.executor_status).fallback_type is (
        FallbackType.EVIDENCE_VALIDATION_FAILED)
    result = run(bundle(raw), verifier=verifier, composer=composer)
    assert verifier.calls == [] and composer.calls == []
    assert evaluation_of(result).gatekeeper_result is None  # Gatekeeper did not run
    assert [node for node, _, _ in result.events] == ["execute", "fallback"]
    assert raw not in answer_text(result)


def test_degrade__structured_parse_failure_remains_observable() -> None:
    result = run(bundle("{\"claims\": [\"c1\"]}"))
    assert result.events[0] == ("execute", "completed", {
        "executor_status": StageStatus.INVALID_OUTPUT.value, "parse_failure": "claims_not_objects",
        "turns": 0, "route": "fallback"})
    evaluation = evaluation_of(result)
    assert evaluation.executor_status is StageStatus.INVALID_OUTPUT
    assert evaluation.failure_stage == "execute"
    assert evaluation.failure_reason is FallbackReason.EXECUTOR_INVALID_OUTPUT
    assert result.result.self_evaluation.rule_evaluation["parse_failure"] == "claims_not_objects"
    assert result.result.status == "FALLBACK" and result.result.verdict is None
    assert evaluation.verified_evidence == [] and evaluation.executor_structured_output is None


# --- Requirement: Executor Gatekeeper SHALL validate structured-output failures -------------

@pytest.mark.parametrize("field", ["diagnosis_summary", "user_facing_answer"])
def test_gatekeeper__schema_rule_rejects_removed_fields(field: str) -> None:
    result = gatekeep(good_output(**{field: "All good."}), invocations()).result
    assert result.status == "fail" and result.severity is Severity.REJECT
    assert RuleId.SCHEMA in result.failed_rules
    assert any(field in error for error in result.errors)


def test_gatekeeper__schema_rule_rejects_missing_evidence_bindings() -> None:
    output = executor_output(errors_claim(), claim("c2", "payment-db is saturated"))
    result = gatekeep(output, invocations()).result
    assert result.status == "fail" and result.severity is Severity.REJECT
    assert result.failed_rules == [RuleId.SCHEMA]


def test_gatekeeper__invocation_rule_rejects_fabricated_invocation_ids() -> None:
    result = gatekeep(executor_output(errors_claim(), fabricated_claim()), invocations()).result
    assert result.status == "fail" and RuleId.INVOCATION_REF in result.failed_rules
    failed = [b for b in result.checked_bindings if b.status == "fail"]
    assert [(b.claim_id, b.rule) for b in failed] == [("c9", RuleId.INVOCATION_REF)]


def test_gatekeeper__invocation_rule_rejects_tool_name_mismatch() -> None:
    wrong_tool = claim("c2", "payment-db connection pool exhausted",
                       binding(LOGS_ID, "query_metrics"))
    result = gatekeep(executor_output(errors_claim(), wrong_tool), invocations()).result
    assert result.status == "fail" and result.failed_rules == [RuleId.INVOCATION_REF]
    assert "query_metrics" in result.errors[0] and "search_logs" in result.errors[0]


def test_gatekeeper__valid_structured_output_passes_initial_gatekeeper_rules() -> None:
    outcome = gatekeep(good_output(), invocations())
    assert outcome.result.status == "pass" and outcome.result.severity is Severity.PASS
    assert outcome.result.failed_rules == [] and outcome.result.errors == []
    assert all(r.status == "pass" for r in outcome.result.rules)
    assert [c.claim_id for c in outcome.verified_output.claims] == ["c1", "c2", "c3", "c4"]


@pytest.mark.parametrize(
    "output",
    [good_output(user_facing_answer="fine"), executor_output(fabricated_claim()),
     executor_output()],
    ids=["schema-failure", "no-passed-binding", "no-claims"],
)
def test_gatekeeper__gatekeeper_reject_bypasses_verifier(output: dict[str, Any]) -> None:
    verifier = scripted()
    result = run(output, verifier=verifier)
    assert verifier.calls == []
    assert result.result.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    assert evaluation_of(result).failure_reason is FallbackReason.GATEKEEPER_REJECT
    assert routing.after_gatekeep(Severity.REJECT).node is Node.FALLBACK


def test_gatekeeper__gatekeeper_low_confidence_is_bounded() -> None:
    output = executor_output(errors_claim(), deploy_claim(), fabricated_claim())
    outcome = gatekeep(output, invocations())
    assert outcome.result.severity is Severity.LOW_CONFID
    assert {e.claim_id for e in outcome.verified_evidence} == {"c1", "c3"}
    verifier = scripted(verifier_reply("PASS", {"c1": "direct_observation",
                                                "c3": "direct_observation"}, groundedness=1.0))
    result = run(output, verifier=verifier, composer=scripted(composer_reply()))
    assert result.result.verdict is Verdict.LOW_CONFID


# --- Requirement: Verifier SHALL use verified claim-local evidence for derivability ---------

def test_derivability__verified_excerpt_supports_direct_observation() -> None:
    outcome = gatekeep(executor_output(errors_claim(), rate_claim()), invocations())
    verifier_input = build_verifier_input(outcome, query=QUERY)
    assert verifier_input.verdict_ceiling is Verdict.PASS
    output = VerifierOutput.model_validate_json(
        OfflineVerifier().respond(load_prompt("verifier"),
                                  verifier_input.model_dump_json().encode()).text)
    assert [(c.claim_id, c.verification) for c in output.claim_checks] == [
        ("c1", Verification.DIRECT_OBSERVATION), ("c2", Verification.DIRECT_OBSERVATION)]
    # the same claim bound to an excerpt that lacks its facts is not a direct observation
    weak = claim("c1", "checkout-service logged 1432 errors, returning HTTP 500",
                 binding(path="$.hits[1].message", matched_text="timeout after 5000ms"))
    weak_input = build_verifier_input(gatekeep(executor_output(weak), invocations()),
                                      query=QUERY)
    weak_output = VerifierOutput.model_validate_json(OfflineVerifier().respond(
        load_prompt("verifier"), weak_input.model_dump_json().encode()).text)
    assert weak_output.claim_checks[0].verification is not Verification.DIRECT_OBSERVATION


def test_derivability__verified_evidence_is_complete_verifier_context() -> None:
    verifier_a = scripted(verifier_reply("PASS", ALL_DIRECT))
    run(good_output(), verifier=verifier_a)
    # more unreferenced tool material: extra log lines and a whole extra invocation
    noisy = [logs_with_noise(), *invocations()[1:],
             invocation("toolu_01EXTRA0001", "get_events", events=["OOMKilled pod x-1"])]
    verifier_b = scripted(verifier_reply("PASS", ALL_DIRECT))
    run(bundle(good_output(), tools=noisy), verifier=verifier_b)
    assert verifier_a.calls[0][1] == verifier_b.calls[0][1]


def logs_with_noise() -> Any:
    hits = [{"message": LOG_500}, {"message": LOG_TIMEOUT}, {"message": UNBOUND_LOG},
            {"message": "GC pause 3s on checkout-7f9c-x2"}]
    return logs_invocation(hits=hits, top_messages=[{"message": "x", "count": 9}])


# --- Requirement: Gatekeeper severity SHALL constrain effective verdict ---------------------

def test_severity__reject_severity_bypasses_verifier() -> None:
    state = nodes.gatekeep_node(PipelineState(query=QUERY),
                                executor_output(fabricated_claim()), invocations())
    assert state.gatekeeper is not None
    assert state.gatekeeper.result.severity is Severity.REJECT
    assert state.verdict_ceiling is None and state.failure_stage == "gatekeep"
    route = routing.after_gatekeep(state.gatekeeper.result.severity)
    assert route.node is Node.FALLBACK and route.reason is FallbackReason.GATEKEEPER_REJECT
    with pytest.raises(ValueError):
        build_verifier_input(state.gatekeeper, query=QUERY)
    evaluation = verifier_evaluation(nodes.fallback_node(state, route))
    assert evaluation.effective_verdict is None and evaluation.verdict is None
    assert evaluation.verifier_status is VerifierStatus.NOT_RUN


@pytest.mark.parametrize("groundedness", [0.5, 1.0], ids=["score-0.5", "score-1.0"])
def test_severity__low_confidence_severity_prevents_pass(groundedness: float) -> None:
    assert Severity.LOW_CONFID.ceiling is Verdict.LOW_CONFID
    claims = [verified_claim("c1", "a")]
    checks = [check("c1", Verification.DIRECT_OBSERVATION)]
    assert effective_verdict(Verdict.PASS, claims=claims, checks=checks,
                             ceiling=Severity.LOW_CONFID.ceiling,
                             groundedness_score=groundedness) is Verdict.LOW_CONFID


def test_severity__gatekeeper_audit_includes_severity() -> None:
    output = executor_output(errors_claim(), fabricated_claim())
    dump = evaluation_of(run(output)).model_dump(mode="json")["gatekeeper_result"]
    assert {"status", "severity", "checked_bindings", "failed_rules", "warnings",
            "errors"} <= set(dump)
    assert dump["status"] == "fail" and dump["severity"] == "low_confid"
    assert dump["failed_rules"] == ["evidence.invocation_ref"]
    assert len(dump["checked_bindings"]) == 3


# --- the rest of the Gatekeeper rule table (DESIGN.md) --------------------------------------

@pytest.mark.parametrize(
    ("bad", "tools", "rule"),
    [
        (binding(LOGS_ID, "search_logs", "$.hits[0].message"),
         [invocation(LOGS_ID, "search_logs", status=LifecycleStatus.PROJECTING,
                     evidence_status=None, projection=False)],
         RuleId.INVOCATION_STATUS),
        (binding(LOGS_ID, "search_logs", "$.hits[0].message"),
         [invocation(LOGS_ID, "search_logs", status=LifecycleStatus.ERROR,
                     evidence_status=None, projection=False)],
         RuleId.INVOCATION_STATUS),
        (binding(path="hits[0].message"), None, RuleId.PATH),
        (binding(path="$.hits[*].message"), None, RuleId.PATH),
        (binding(path="$..message"), None, RuleId.PATH),
        (binding(path="$.hits[9].message"), None, RuleId.PATH),
        (binding(path="$.hits[0].body"), None, RuleId.PATH),
        (binding(matched_text="   "), None, RuleId.MATCHED_TEXT),
        (binding(matched_text="redis-cache evicted keys"), None, RuleId.MATCHED_TEXT),
        (binding(matched_text="PAYMENT-DB connection pool exhausted"), None,
         RuleId.MATCHED_TEXT),
    ],
    ids=["invocation-projecting", "invocation-error", "path-without-root", "path-wildcard",
         "path-descendant", "path-index-out-of-range", "path-missing-key",
         "matched-text-empty", "matched-text-not-found", "matched-text-case-differs"],
)
def test_gatekeeper__binding_rule_table(
    bad: dict[str, str], tools: list[Any] | None, rule: RuleId
) -> None:
    output = executor_output(claim("c1", "payment-db connection pool exhausted", bad))
    result = gatekeep(output, tools if tools is not None else invocations()).result
    assert result.failed_rules == [rule]
    assert result.checked_bindings[0].status == "fail"
    assert result.checked_bindings[0].rule is rule
    assert result.severity is Severity.REJECT


def test_gatekeeper__matched_text_whitespace_and_nfc_are_normalized() -> None:
    spaced = binding(matched_text="payment-db   connection\n pool exhausted")
    decomposed = binding(METRICS_ID, "query_metrics", "$.series[0].name", "http_5xx_rate")
    output = executor_output(claim("c1", "payment-db connection pool exhausted", spaced),
                             claim("c2", "http_5xx_rate", decomposed))
    assert gatekeep(output, invocations()).result.severity is Severity.PASS


def test_gatekeeper__schema_rule_rejects_duplicate_claim_ids_and_bad_shape() -> None:
    dup = executor_output(errors_claim("c1"), rate_claim("c1"))
    assert gatekeep(dup, invocations()).result.failed_rules == [RuleId.SCHEMA]
    bad_kind = executor_output(claim("c1", "x", binding(), kind="GUESS"))
    assert gatekeep(bad_kind, invocations()).result.failed_rules == [RuleId.SCHEMA]
    extra = executor_output(errors_claim(), notes="internal")
    assert gatekeep(extra, invocations()).result.failed_rules == [RuleId.SCHEMA]


def test_gatekeeper__hypothesis_without_bindings_fails_the_schema_rule() -> None:
    """Every analysis item cites at least one tool call (harness-contracts), a HYPOTHESIS too:
    one without bindings fails schema.executor_v2 and takes the structural repair."""
    output = executor_output(errors_claim(),
                             claim("c2", "maybe the cache", status=ClaimStatus.HYPOTHESIS))
    outcome = gatekeep(output, invocations())
    assert outcome.result.severity is Severity.REJECT
    assert outcome.result.failed_rules == [RuleId.SCHEMA]
    assert any("hypothesis claim c2 has no evidence bindings" in e
               for e in outcome.result.errors)
    result = run(output).result
    assert result.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    assert "maybe the cache" not in result.final_answer.user_facing_answer
