"""spec/composer.md: one test per scenario, named `test_<requirement>__<scenario>`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.common import FallbackType, Verdict
from models.composer import ComposerInput
from models.evaluation import StageStatus
from models.executor import ClaimKind, ClaimStatus, ExecutorEvidenceV2
from models.fallback import FallbackReason
from models.verifier import Verification
from pipeline.errors import ProviderRejectedError
from pipeline.rules.composer_input import BEYOND_GAP, build_composition
from pipeline.rules.fallback import semantic_unavailable
from pipeline.rules.rendering import NO_RELIABLE_CONCLUSION, render

from .helpers import (
    DEPLOY_CLAIM_TEXT,
    ERRORS_TEXT,
    LOG_500,
    QUERY,
    RATE_TEXT,
    ROOT_TEXT,
    UNBOUND_LOG,
    allowed,
    answer_text,
    assert_published,
    check,
    composer_input,
    composer_reply,
    errors_claim,
    evidence,
    executor_output,
    gap,
    good_output,
    rate_claim,
    root_claim,
    run,
    scripted,
    verified_claim,
    verifier_reply,
)

CLAIMS = [
    verified_claim("c1", ERRORS_TEXT),
    verified_claim("c2", RATE_TEXT),
    verified_claim("c3", DEPLOY_CLAIM_TEXT),
    verified_claim("c4", ROOT_TEXT, kind=ClaimKind.ROOT_CAUSE),
]
ALL_DIRECT = {"c1": "direct_observation", "c2": "direct_observation",
              "c3": "direct_observation", "c4": "reasonable_inference"}


def build(
    verdict: Verdict,
    verifications: dict[str, Verification],
    *,
    claims: list[Any] | None = None,
    output: dict[str, Any] | None = None,
    gaps: list[Any] | None = None,
    rationale: str = "Checked every claim.",
    unsaid: tuple[str, ...] = (),
) -> ComposerInput:
    return build_composition(
        query=QUERY, verdict=verdict, claims=CLAIMS if claims is None else claims,
        checks=[check(cid, v) for cid, v in verifications.items()],
        gaps=gaps or [], executor_output=ExecutorEvidenceV2.model_validate(
            output or executor_output()),
        rationale=rationale, unsaid=unsaid,
    ).composer_input


def allowed_ids(ci: ComposerInput) -> list[str]:
    return [c.claim_id for c in ci.allowed_claims]


def hypothesis_ids(ci: ComposerInput) -> list[str]:
    return [i for h in ci.allowed_hypotheses for i in h.claim_ids]


# --- Requirement: Composer SHALL generate final user-facing Chat answers --------------------

def test_generation__composer_receives_only_filtered_material() -> None:
    composer = scripted(composer_reply())
    result = run(good_output(), composer=composer)
    assert result.result.status == "SUCCESS"
    sent = json.loads(composer.calls[0][1])
    assert set(sent) == {"original_query", "verdict", "allowed_claims", "allowed_hypotheses",
                         "missing_info", "recommended_actions", "rationale"}
    raw = composer.calls[0][1].decode()
    for excluded in (LOG_500, UNBOUND_LOG, "toolu_", "evidence_bindings", "matched_text",
                     "$.hits", "user_facing_answer", "invocation_id"):
        assert excluded not in raw, excluded
    assert sent["original_query"] == QUERY and sent["verdict"] == "PASS"


@pytest.mark.parametrize(
    "reply",
    [
        "```json\n" + composer_reply() + "\n```",
        "Here is the answer: " + composer_reply(),
        composer_reply() + "\nHope this helps.",
        json.dumps({"answer_summary": [{"text": "x", "cites": ["c1"]}],
                    "user_facing_answer": []}),
        json.dumps([json.loads(composer_reply())]),
        json.dumps({**json.loads(composer_reply()), "confidence": "high"}),
    ],
    ids=["markdown-fence", "text-before-json", "text-after-json", "missing-field",
         "array-not-object", "extra-field"],
)
def test_generation__composer_outputs_strict_json(reply: str) -> None:
    composer = scripted(reply, composer_reply())
    result = run(good_output(), composer=composer)
    rows = [a for a in result.attempts if a.role == "composer"]
    assert [a.outcome for a in rows] == ["invalid_output", "ok"]
    assert_published(result.result.final_answer, composer_reply())
    # the same bad reply twice never reaches the user
    failed = run(good_output(), composer=scripted(reply, reply))
    assert failed.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert "```" not in answer_text(failed) and "Hope this helps" not in answer_text(failed)


@pytest.mark.parametrize(
    "new_fact",
    [
        "inventory-service is also failing",            # service name
        "errors started at 13:41",                      # timestamp
        "the pool raised CONNECTION_RESET",             # error code
        "p99 latency reached 950ms",                    # metric value with unit
        "v2.2.9 was the last good release",             # version
        "pod checkout-7f9c-x2 crashed",                 # identifier
    ],
    ids=["service", "timestamp", "error-code", "metric-value", "version", "identifier"],
)
def test_generation__composer_does_not_introduce_new_facts(new_fact: str) -> None:
    reply = composer_reply(f"checkout-service logged 1432 errors; {new_fact}.")
    result = run(good_output(), composer=scripted(reply, reply))
    rows = [a for a in result.attempts if a.role == "composer"]
    assert [(a.attempt_number, a.outcome) for a in rows] == [(1, "guard_rejected"),
                                                               (2, "guard_rejected")]
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert new_fact not in answer_text(result)
    # the same answer without the new fact ships
    clean = composer_reply("checkout-service logged 1432 errors; its http_5xx_rate rose to 41.8% "
                           "at 14:07, after v2.3.1 was deployed.", cites=("c1", "c2", "c3"))
    assert run(good_output(), composer=scripted(clean)).result.status == "SUCCESS"


ISSUE_19_INVENTIONS = [
    # the reviewer's replies (issue 19), each a cited statement a real model could write
    ("summary", "The root cause is a memory leak in the JVM of checkout-service.", ("c4",),
     "memory leak"),
    ("body", "checkout-service returned HTTP 500 because a memory leak filled the JVM heap.",
     ("c1",), "JVM"),
    ("body", "The Kafka brokers are degraded as well.", ("c1",), "Kafka"),
    ("body", "redis is also degraded", ("c2",), "redis"),
    ("action", "Restart every checkout-service pod and flush the payments cache", ("A1",),
     "flush"),
    ("action", "Restore the payment-db connection pool size to 50 to clear the memory leak in "
     "the JVM heap", ("A1",), "memory leak"),
]


@pytest.mark.parametrize(("field", "text", "cites", "invented"), ISSUE_19_INVENTIONS,
                         ids=[f"{f}-{i}" for i, (f, *_) in enumerate(ISSUE_19_INVENTIONS)])
def test_generation__an_invented_cause_entity_or_action_never_ships(
        field: str, text: str, cites: tuple[str, ...], invented: str) -> None:
    """Cited or not, a statement that adds a cause, an entity, an action or an action's reason
    is refused; the whole reply takes the retry, then the fallback, and the invention is in
    no field of what the user reads."""
    faithful = "checkout-service logged 1432 errors, returning HTTP 500."
    if field == "action":
        reply = composer_reply(faithful, actions=[text], action_cites=cites)
    elif field == "summary":
        reply = composer_reply(text, cites=cites)
    else:
        reply = json.dumps({**json.loads(composer_reply(faithful)),
                            "user_facing_answer": [{"text": text, "cites": list(cites)}]})
    result = run(good_output(), composer=scripted(reply, reply))
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert invented.casefold() not in answer_text(result).casefold()


@pytest.mark.parametrize("text", [
    "The HTTP 500 errors are due solely to the v2.3.1 deploy; this is confirmed.",
    "The v2.3.1 deploy alone led to the HTTP 500 errors, and that is the confirmed cause.",
    "checkout-service v2.3.1 is clearly what broke checkout-service.",
])
def test_claim_checks__an_inference_never_becomes_certainty(text: str) -> None:
    """Without an allowed ROOT_CAUSE claim (PASS on findings only), causal, exclusive or
    certain wording about the deploy is refused, whatever the phrasing."""
    output = good_output()
    output["claims"] = [c for c in output["claims"] if c["kind"] != "ROOT_CAUSE"]
    reply = composer_reply(text, cites=("c1", "c3"))
    result = run(output, composer=scripted(reply, reply))
    assert result.result.verdict is Verdict.PASS
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    shown = answer_text(result)
    assert "solely" not in shown and "confirmed cause" not in shown and "clearly" not in shown


# --- Requirement: Composer input SHALL honor Verifier claim checks ---------------------------

def test_claim_checks__passing_claims_become_allowed_claims() -> None:
    ci = build(Verdict.PASS, {"c1": Verification.DIRECT_OBSERVATION,
                              "c2": Verification.UNSUPPORTED})
    assert allowed_ids(ci) == ["c1"]
    assert ci.allowed_claims[0].text == ERRORS_TEXT
    assert ci.allowed_claims[0].verification is Verification.DIRECT_OBSERVATION


def test_claim_checks__reasonable_inferences_remain_bounded() -> None:
    contributing = verified_claim("c5", "The pool cut contributed to the errors",
                                  kind=ClaimKind.CONTRIBUTING_FACTOR)
    checks = {"c1": Verification.DIRECT_OBSERVATION, "c4": Verification.REASONABLE_INFERENCE,
              "c5": Verification.REASONABLE_INFERENCE}
    claims = [CLAIMS[0], CLAIMS[3], contributing]
    ci = build(Verdict.PASS, checks, claims=claims)
    assert allowed_ids(ci) == ["c1", "c4", "c5"]
    assert {c.claim_id: c.verification for c in ci.allowed_claims}["c5"] is (
        Verification.REASONABLE_INFERENCE)
    # PASS with a root-cause claim: it may be stated as the root cause
    assert render(ci).answer_summary == f"Root cause: {ROOT_TEXT}"
    # a non-root-cause inference is never presented as the root cause
    without_root = render(build(Verdict.PASS, checks, claims=[CLAIMS[0], contributing]))
    assert "Root cause:" not in without_root.user_facing_answer
    assert "no root cause is confirmed" in without_root.answer_summary
    inferred = without_root.user_facing_answer.split("Inferred from the evidence:")[1]
    assert contributing.text in inferred
    # under LOW_CONFID even the root-cause claim is only a possible direction
    low = render(build(Verdict.LOW_CONFID, checks, claims=claims))
    assert "Root cause:" not in low.user_facing_answer
    directions = low.user_facing_answer.split("Possible directions (not confirmed):")[1]
    assert ROOT_TEXT in directions


@pytest.mark.parametrize("verdict", [Verdict.PASS, Verdict.LOW_CONFID])
def test_claim_checks__overstated_claims_are_not_confirmed_findings(verdict: Verdict) -> None:
    ci = build(verdict, {"c1": Verification.DIRECT_OBSERVATION, "c2": Verification.OVERSTATED})
    assert allowed_ids(ci) == ["c1"]
    assert hypothesis_ids(ci) == ["c2"]
    answer = render(ci).user_facing_answer
    directions = answer.split("Possible directions (not confirmed):")[1]
    assert RATE_TEXT in directions
    assert answer.count(RATE_TEXT) == 1


@pytest.mark.parametrize("verdict", [Verdict.PASS, Verdict.LOW_CONFID])
def test_claim_checks__an_overstated_claim_worded_beyond_its_outputs_is_no_direction(
        verdict: Verdict) -> None:
    """Overstated for words no output of its tool calls uses (`guards.unsaid_words`), a
    claim is not offered as a possible direction: those words are the model's alone. A
    conclusion withheld so is named as a gap, in a fixed line."""
    checks = {"c1": Verification.DIRECT_OBSERVATION, "c2": Verification.OVERSTATED,
              "c4": Verification.OVERSTATED}
    ci = build(verdict, checks, claims=[CLAIMS[0], CLAIMS[1], CLAIMS[3]], unsaid=("c4",))
    assert allowed_ids(ci) == ["c1"]
    assert [h.claim_ids for h in ci.allowed_hypotheses] == [["c2"]]
    assert BEYOND_GAP in [g.text for g in ci.missing_info]
    answer = render(ci).user_facing_answer
    assert ROOT_TEXT not in answer and RATE_TEXT in answer
    # a finding worded beyond its outputs is withheld without the conclusion gap
    finding_only = build(verdict, {"c1": Verification.DIRECT_OBSERVATION,
                                   "c2": Verification.OVERSTATED}, unsaid=("c2",))
    assert finding_only.allowed_hypotheses == []
    assert BEYOND_GAP not in [g.text for g in finding_only.missing_info]


@pytest.mark.parametrize(
    "withheld",
    [Verification.UNSUPPORTED, Verification.EXTERNAL_UNKNOWN, Verification.CONTRADICTED],
    ids=lambda v: str(v),
)
def test_claim_checks__unsupported_or_external_claims_are_withheld(
    withheld: Verification,
) -> None:
    ci = build(Verdict.LOW_CONFID, {"c1": Verification.DIRECT_OBSERVATION, "c3": withheld},
               gaps=[gap("c3")], rationale=f"c3 says: {DEPLOY_CLAIM_TEXT}")
    assert allowed_ids(ci) == ["c1"] and "c3" not in hypothesis_ids(ci)
    assert DEPLOY_CLAIM_TEXT not in ci.model_dump_json()
    assert DEPLOY_CLAIM_TEXT not in render(ci).user_facing_answer
    # end to end, through a scripted Verifier
    reply = verifier_reply("LOW_CONFID", {**ALL_DIRECT, "c3": withheld.value})
    result = run(good_output(), verifier=scripted(reply))
    assert DEPLOY_CLAIM_TEXT not in answer_text(result)


# --- Requirement: Composer SHALL respect verdict-specific wording ---------------------------

def test_wording__pass_answer_uses_confirmed_material() -> None:
    findings = [allowed("c1", ERRORS_TEXT), allowed("c2", RATE_TEXT)]
    no_root = render(composer_input(Verdict.PASS, claims=findings))
    assert "no root cause is confirmed" in no_root.answer_summary
    assert "Root cause" not in no_root.user_facing_answer
    confirmed = no_root.user_facing_answer.split("Confirmed findings:")[1]
    assert ERRORS_TEXT in confirmed and RATE_TEXT in confirmed
    root = allowed("c4", ROOT_TEXT, kind=ClaimKind.ROOT_CAUSE,
                   verification=Verification.REASONABLE_INFERENCE)
    with_root = render(composer_input(Verdict.PASS, claims=[*findings, root]))
    assert with_root.answer_summary == f"Root cause: {ROOT_TEXT}"
    result = run(good_output())
    assert result.result.verdict is Verdict.PASS
    assert result.result.final_answer.answer_summary == f"Root cause: {ROOT_TEXT}"


def test_wording__low_confid_answer_separates_findings_and_gaps() -> None:
    ci = composer_input(
        Verdict.LOW_CONFID,
        claims=[allowed("c1", ERRORS_TEXT),
                allowed("c4", ROOT_TEXT, kind=ClaimKind.ROOT_CAUSE,
                        verification=Verification.REASONABLE_INFERENCE)],
        hypotheses=["A noisy neighbour starved payment-db"],
        missing_info=["Pool utilization for payment-db was not queried."],
    )
    answer = render(ci).user_facing_answer
    confirmed, _, rest = answer.partition("Possible directions (not confirmed):")
    directions, _, gaps = rest.partition("Evidence gaps:")
    assert ERRORS_TEXT in confirmed.split("Confirmed information:")[1]
    assert "A noisy neighbour" in directions and "A noisy neighbour" not in confirmed
    assert ROOT_TEXT in directions and ROOT_TEXT not in confirmed
    assert "Pool utilization for payment-db was not queried." in gaps
    assert "no root cause is confirmed" in render(ci).answer_summary


def test_wording__reject_answer_avoids_root_cause_conclusions() -> None:
    checks = {"c1": Verification.DIRECT_OBSERVATION, "c2": Verification.CONTRADICTED,
              "c4": Verification.REASONABLE_INFERENCE, "c3": Verification.DIRECT_OBSERVATION}
    root_direct = [*CLAIMS[:3], verified_claim("c4", ROOT_TEXT, kind=ClaimKind.ROOT_CAUSE)]
    output = executor_output(hypotheses=[{"text": "The pool cut caused it", "claim_ids": ["c1"]}])
    for verifications in (checks, {**checks, "c4": Verification.DIRECT_OBSERVATION}):
        ci = build(Verdict.REJECT, verifications, claims=root_direct, output=output)
        assert ci.allowed_hypotheses == []
        assert all(c.kind is not ClaimKind.ROOT_CAUSE for c in ci.allowed_claims)
        answer = render(ci)
        assert answer.answer_summary == NO_RELIABLE_CONCLUSION
        assert ROOT_TEXT not in answer.user_facing_answer
        assert "Root cause" not in answer.user_facing_answer
        assert "The pool cut caused it" not in answer.user_facing_answer


# --- Requirement: Composer failures SHALL degrade safely ------------------------------------

@pytest.mark.parametrize(
    "replies",
    [["{\"answer\": \"raw composer junk\"}", "raw composer junk again"],
     [ProviderRejectedError("HTTP 400 invalid request")]],
    ids=["exhausted-fixed-input-retry", "non-retryable-failure"],
)
def test_failures__malformed_composer_output_falls_back_safely(replies: list[Any]) -> None:
    composer = scripted(*replies)
    output = good_output(hypotheses=[{"text": "Executor-only musing about DNS",
                                      "claim_ids": []}])
    result = run(output, composer=composer)
    assert len(composer.calls) == len(replies)
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    evaluation = result.result.self_evaluation.verifier_evaluation
    assert evaluation.failure_reason is FallbackReason.COMPOSER_UNAVAILABLE
    shown = answer_text(result)
    assert "raw composer junk" not in shown and "Executor-only musing" not in shown
    # the deterministic answer is exactly the rendering of the filtered Composer input
    expected = render(ComposerInput.model_validate_json(composer.calls[0][1]))
    assert result.result.final_answer.user_facing_answer == expected.user_facing_answer
    assert ERRORS_TEXT in shown
    # the fallback's verified sources are those of allowed claims only
    ci = build(Verdict.LOW_CONFID, {"c1": Verification.DIRECT_OBSERVATION,
                                    "c2": Verification.UNSUPPORTED})
    fallback = semantic_unavailable(
        query=QUERY, reason=FallbackReason.COMPOSER_UNAVAILABLE, composer_input=ci,
        evidence=[evidence("c1", "1432", path="$.total"),
                  evidence("c2", "41.8%", evidence_id="E2", path="$.series[0].peak")])
    assert [(v.claim_id, v.path) for v in fallback.verified_sources] == [("c1", "$.total")]
    assert RATE_TEXT not in fallback.user_facing_answer


def test_failures__composer_audit_is_persisted() -> None:
    ok = run(good_output())
    evaluation = ok.result.self_evaluation.verifier_evaluation
    assert evaluation.composer_status is StageStatus.OK
    assert evaluation.composer_output is not None
    assert evaluation.composer_output.model_dump() == ok.result.final_answer.model_dump()
    audit = evaluation.composer_output.model_dump_json()
    assert UNBOUND_LOG not in audit and LOG_500 not in audit and "projection" not in audit
    failed = run(good_output(), composer=scripted("nope", "nope"))
    failed_eval = failed.result.self_evaluation.verifier_evaluation
    assert failed_eval.composer_status is StageStatus.FAILED
    assert failed_eval.composer_output is None
    assert failed_eval.failure_stage == "compose"
    assert failed_eval.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert [(n, k) for n, k, _ in failed.events][-2:] == [("compose", "completed"),
                                                          ("fallback", "completed")]
    assert [a.outcome for a in failed.attempts if a.role == "composer"] == [
        "invalid_output", "invalid_output"]


def test_claim_checks__hypothesis_status_claim_is_never_confirmed() -> None:
    hypothesis = verified_claim("c5", "payment-db ran out of connections",
                                status=ClaimStatus.HYPOTHESIS)
    ci = build(Verdict.PASS, {"c1": Verification.DIRECT_OBSERVATION,
                              "c5": Verification.DIRECT_OBSERVATION},
               claims=[CLAIMS[0], hypothesis])
    assert allowed_ids(ci) == ["c1"] and hypothesis_ids(ci) == ["c5"]


def test_claim_checks__executor_hypotheses_and_actions_rest_on_allowed_claims() -> None:
    output = executor_output(
        errors_claim(), rate_claim(), root_claim(),
        hypotheses=[{"text": "The http_5xx_rate of checkout-service may have risen to 41.8%",
                     "claim_ids": ["c2"]},
                    {"text": "A noisy neighbour", "claim_ids": ["c3"]},
                    {"text": "The 9000 evictions mattered", "claim_ids": ["c2"]},
                    {"text": "A memory leak probably drove the 41.8% peak",
                     "claim_ids": ["c2"]}],
        recommended_actions=[{"text": "Check the checkout-service errors", "claim_ids": ["c1"]},
                             {"text": "Page the DBA", "claim_ids": ["c3"]},
                             {"text": "Restart checkout-service to clear its memory leak",
                              "claim_ids": ["c1"]}],
    )
    ci = build(Verdict.LOW_CONFID, {"c1": Verification.DIRECT_OBSERVATION,
                                    "c2": Verification.OVERSTATED,
                                    "c3": Verification.UNSUPPORTED},
               output=output)
    texts = [h.text for h in ci.allowed_hypotheses]
    assert "The http_5xx_rate of checkout-service may have risen to 41.8%" in texts
    assert "A noisy neighbour" not in texts          # rests on a withheld claim
    assert "The 9000 evictions mattered" not in texts  # states a fact its claims do not
    assert not [t for t in texts if "memory leak" in t]  # a cause its claims never name
    assert [a.text for a in ci.recommended_actions] == ["Check the checkout-service errors"]


# --- Requirement: gaps name what is missing; they never assert (issue 19) ----------------------

ASSERTING_GAPS = [
    "The root cause is a DNS outage in the resolver fleet, confirmed by the SRE on call",
    "2026-11-30T14:03:12Z ERROR payment-db connection pool exhausted after kafka-broker-3 failed",
    "Traces were not checked, but the pool was clearly exhausted by the v2.3.1 deploy.",
    "redis-cache was saturated, and its metrics were not queried.",
]


@pytest.mark.parametrize("verdict", ["REJECT", "LOW_CONFID"])
def test_wording__an_asserting_gap_never_reaches_the_answer(verdict: str) -> None:
    """The Executor's missing_info and the Verifier's gap descriptions are model text: under
    REJECT and LOW_CONFID (where gaps are always listed) one that asserts a cause, a finding or
    an entity is shown as a fixed line, never as written."""
    checks = {**ALL_DIRECT, "c2": "overstated"} if verdict == "LOW_CONFID" else {
        **ALL_DIRECT, "c2": "contradicted"}
    reply = verifier_reply(verdict, checks, gaps=[
        {"claim_id": "c2", "critical": True, "description": ASSERTING_GAPS[0],
         "suggested_tool": "query_metrics"}])
    result = run(good_output(missing_info=ASSERTING_GAPS), verifier=scripted(reply)).result
    shown = result.final_answer.user_facing_answer
    assert result.verdict == verdict
    for invented in ("DNS", "resolver", "SRE", "kafka", "clearly", "redis", "saturated"):
        assert invented not in shown, invented
    _, _, gaps = shown.partition("Evidence gaps:")
    assert "More evidence was asked for than this run gathered (suggested tool: query_metrics)" \
        in gaps
    assert "The investigation reported missing information that is not shown" in gaps


def test_claim_checks__a_withheld_action_does_not_repeat_the_executors_claim_ids() -> None:
    """The reason stored for a withheld action counts the claims it cites that are not allowed;
    the ids are the Executor's own unverified strings and are not repeated."""
    output = executor_output(recommended_actions=[
        {"text": "Check the payment-db pool", "claim_ids": ["c1", "dns-outage-is-root-cause"]}])
    composition = build_composition(
        query=QUERY, verdict=Verdict.PASS, claims=CLAIMS,
        checks=[check("c1", Verification.DIRECT_OBSERVATION)], gaps=[],
        executor_output=ExecutorEvidenceV2.model_validate(output), rationale="Checked.")
    [withheld] = composition.withheld_actions
    assert withheld.reason == "cites 1 claim that is not allowed"
    assert "dns" not in withheld.model_dump_json()
