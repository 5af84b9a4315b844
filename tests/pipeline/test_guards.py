"""The deterministic guards: the Verifier post-check and the Composer no-new-facts guard."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec.helpers import (
    DEPLOYS_ID,
    LOG_500,
    LOGS_ID,
    QUERY,
    allowed,
    answer_text,
    check,
    composer_input,
    composer_reply,
    evidence,
    gap,
    good_output,
    run,
    scripted,
    verified_claim,
)
from spec.strategies import distinct_texts, incident_texts

from models.common import FallbackType, Verdict
from models.composer import ComposerInput
from models.executor import ClaimKind
from models.gatekeeper import (
    GatekeeperOutcome,
    GatekeeperResult,
    Severity,
    VerifiedEvidence,
    VerifiedExecutorOutput,
)
from models.invocation import EvidenceStatus
from models.verifier import Verification, VerifierInput, VerifierOutput
from pipeline.rules.facts import FactSet
from pipeline.rules.guards import post_check, scope_problem, unsupported_facts
from pipeline.rules.rendering import render
from pipeline.rules.verifier_input import build_verifier_input

POOL_CLAIM = "payment-db connection pool exhausted (max 20)"


def verifier_input(claims: list[tuple[str, str]], items: list[tuple[str, str]], *,
                   kind: ClaimKind = ClaimKind.FINDING) -> VerifierInput:
    """A verifier input with these (claim id, text) claims of `kind` and (claim id, matched
    text) items."""
    outcome = GatekeeperOutcome(
        result=GatekeeperResult(status="pass", severity=Severity.PASS, rules=[],
                                failed_rules=[], checked_bindings=[]),
        verified_output=VerifiedExecutorOutput(
            claims=[verified_claim(cid, text, kind=kind) for cid, text in claims]),
        verified_evidence=[evidence(cid, text, evidence_id=f"E{i + 1}")
                           for i, (cid, text) in enumerate(items)],
    )
    return build_verifier_input(outcome, query=QUERY)


def output(*checks: object, gaps: tuple[object, ...] = ()) -> VerifierOutput:
    return VerifierOutput(verdict=Verdict.PASS, groundedness_score=1.0, rationale="r",
                          claim_checks=list(checks), evidence_gaps=list(gaps))  # type: ignore


# --- the Verifier post-check ----------------------------------------------------------------

@pytest.mark.parametrize(
    ("claim_text", "items", "expected"),
    [
        (POOL_CLAIM, [("c1", LOG_500)], Verification.DIRECT_OBSERVATION),
        ("payment-db connection pool exhausted", [("c1", LOG_500)],
         Verification.DIRECT_OBSERVATION),
        # a key fact (number, entity, version) absent from its evidence: fabricated
        ("payment-db connection pool exhausted (max 30 connections)", [("c1", LOG_500)],
         Verification.CONTRADICTED),
        ("redis-cache v9.9.9 evicted keys", [("c1", LOG_500)], Verification.CONTRADICTED),
        (POOL_CLAIM, [("c2", LOG_500)], Verification.UNSUPPORTED),
        (POOL_CLAIM, [], Verification.UNSUPPORTED),
    ],
    ids=["facts-in-own-evidence", "no-facts-to-check", "some-facts-missing",
         "all-facts-missing", "evidence-of-another-claim-only", "no-evidence"],
)
def test_post_check_holds_direct_observation_to_its_own_evidence(
    claim_text: str, items: list[tuple[str, str]], expected: Verification
) -> None:
    claims = [("c1", claim_text)] + ([("c2", "other")] if any(c == "c2" for c, _ in items)
                                     else [])
    checked = post_check(output(check("c1", Verification.DIRECT_OBSERVATION)),
                         verifier_input(claims, items))
    assert checked.claim_checks[0].verification is expected
    downgraded = expected is not Verification.DIRECT_OBSERVATION
    assert any(d.startswith("c1: direct_observation ->") for d in checked.downgrades) is (
        downgraded)


@pytest.mark.parametrize(
    "verification",
    [Verification.REASONABLE_INFERENCE, Verification.OVERSTATED, Verification.UNSUPPORTED,
     Verification.EXTERNAL_UNKNOWN, Verification.CONTRADICTED],
)
def test_post_check_never_upgrades(verification: Verification) -> None:
    checked = post_check(output(check("c1", verification)),
                         verifier_input([("c1", POOL_CLAIM)], [("c1", LOG_500)]))
    assert checked.claim_checks[0].verification is verification
    assert checked.downgrades == []


def test_post_check_removes_evidence_refs_to_unverified_material() -> None:
    kept = ["E1", "c1", LOGS_ID, "search_logs", "$.hits[0].message"]
    dropped = ["E7", "c9", DEPLOYS_ID, "list_deployments", "$.hits[2].message", ""]
    checked = post_check(
        output(check("c1", Verification.DIRECT_OBSERVATION, *kept, *dropped)),
        verifier_input([("c1", POOL_CLAIM)], [("c1", LOG_500)]),
    )
    assert checked.claim_checks[0].evidence_refs == kept
    assert checked.downgrades == ["c1: evidence refs to unverified material removed"]


def test_post_check_drops_unknown_and_duplicate_checks_and_fills_missing_ones() -> None:
    checked = post_check(
        output(check("c9", Verification.DIRECT_OBSERVATION),
               check("c2", Verification.REASONABLE_INFERENCE),
               check("c2", Verification.DIRECT_OBSERVATION)),
        verifier_input([("c1", POOL_CLAIM), ("c2", "the pool ran dry")],
                       [("c1", LOG_500), ("c2", LOG_500)]),
    )
    assert [(c.claim_id, c.verification) for c in checked.claim_checks] == [
        ("c1", Verification.UNSUPPORTED), ("c2", Verification.REASONABLE_INFERENCE)]
    assert checked.downgrades == [
        "c9: dropped, not a verified claim",
        "c2: duplicate check dropped",
        "c1: no check returned, counted as unsupported",
    ]


def test_post_check_keeps_gaps_about_verified_claims_only() -> None:
    checked = post_check(
        output(check("c1", Verification.OVERSTATED),
               gaps=(gap("c1"), gap("c9"), gap(None))),
        verifier_input([("c1", POOL_CLAIM)], [("c1", LOG_500)]),
    )
    assert [g.claim_id for g in checked.evidence_gaps] == ["c1", None]


def test_post_check_is_what_the_pipeline_persists() -> None:
    reply = json.dumps({"verdict": "PASS", "groundedness_score": 1.0, "rationale": "r",
                        "claim_checks": [
                            {"claim_id": "c1", "verification": "direct_observation",
                             "evidence_refs": ["E1", "toolu_01NOPE"]},
                            {"claim_id": "c2", "verification": "direct_observation"},
                            {"claim_id": "c3", "verification": "direct_observation"},
                            {"claim_id": "c4", "verification": "direct_observation"},
                            {"claim_id": "c77", "verification": "direct_observation"}]})
    result = run(good_output(), verifier=scripted(reply))
    evaluation = result.result.self_evaluation.verifier_evaluation
    assert [c.claim_id for c in evaluation.claim_checks] == ["c1", "c2", "c3", "c4"]
    assert evaluation.claim_checks[0].evidence_refs == ["E1"]
    assert "c77: dropped, not a verified claim" in evaluation.downgrades
    assert result.result.self_evaluation.rule_evaluation["downgrades"] == len(
        evaluation.downgrades)


# --- the template publishes nothing its input does not state ---------------------------------

claims_strategy = st.lists(
    st.tuples(incident_texts, st.sampled_from(list(ClaimKind)),
              st.sampled_from([Verification.DIRECT_OBSERVATION,
                               Verification.REASONABLE_INFERENCE])),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(
    verdict=st.sampled_from(list(Verdict)),
    claims=claims_strategy,
    others=distinct_texts(0, 6),
    query=incident_texts,
)
def test_template_composer_output_states_no_new_fact(
    verdict: Verdict,
    claims: list[tuple[str, ClaimKind, Verification]],
    others: list[str],
    query: str,
) -> None:
    third = len(others) // 3
    ci = composer_input(
        verdict, query=query,
        claims=[allowed(f"c{i}", text, kind=kind, verification=v)
                for i, (text, kind, v) in enumerate(claims)],
        hypotheses=others[:third], missing_info=others[third:2 * third],
        actions=others[2 * third:],
    )
    known = FactSet.from_texts([ci.original_query, *(c.text for c in ci.allowed_claims),
                                *(h.text for h in ci.allowed_hypotheses),
                                *(g.text for g in ci.missing_info),
                                *(a.text for a in ci.recommended_actions)])
    answer = render(ci)
    for text in (answer.answer_summary, answer.user_facing_answer, *answer.recommended_actions):
        assert unsupported_facts(text, known) == [], text


def test_composer_new_fact_uses_the_retry_then_falls_back() -> None:
    invented = composer_reply("checkout-service failed because redis-cache ran out of memory.")
    composer = scripted(invented, invented)
    result = run(good_output(), composer=composer)
    rows = [a for a in result.attempts if a.role == "composer"]
    assert [(a.attempt_number, a.outcome, a.error_type) for a in rows] == [
        (1, "guard_rejected", "GuardRejectedError"), (2, "guard_rejected", "GuardRejectedError")]
    assert rows[0].input_sha256 == rows[1].input_sha256
    assert composer.calls[0][1] == composer.calls[1][1]
    assert result.result.status == "FALLBACK"
    assert result.result.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    assert result.result.verdict is Verdict.PASS  # the verdict stands; only the prose fell back
    filtered = ComposerInput.model_validate_json(composer.calls[0][1])
    assert result.result.final_answer.model_dump() == render(filtered).model_dump()
    assert "redis-cache" not in answer_text(result)


def test_composer_new_fact_then_clean_answer_ships_the_clean_answer() -> None:
    invented = composer_reply("checkout-service failed because redis-cache ran out of memory.")
    clean = composer_reply("checkout-service v2.3.1 was deployed at 14:02, reducing the "
                           "payment-db connection pool to 20.", cites=("c3",))
    result = run(good_output(), composer=scripted(invented, clean))
    assert [a.outcome for a in result.attempts if a.role == "composer"] == [
        "guard_rejected", "ok"]
    assert result.result.status == "SUCCESS"
    assert result.result.final_answer.answer_summary == json.loads(
        clean)["answer_summary"][0]["text"]


# --- negative observations stay within their query's scope (issue 19) -----------------------

def _empty(filter_text: str | None, service: str | None = "inventory-service") -> VerifiedEvidence:
    item = evidence("c1", service or "", path="$.scope.service", service=service,
                    evidence_status=EvidenceStatus.NO_EVIDENCE)
    return item.model_copy(update={"scope": item.scope.model_copy(update={"filter": filter_text})})


@pytest.mark.parametrize(
    ("text", "filter_text", "why"),
    [
        ("inventory-service logged nothing at all, not even warnings, so it is healthy",
         "level >= ERROR", "at all"),
        ("No warning or error logs were found for inventory-service", "level >= ERROR",
         "warning"),
        ("No logs were found for inventory-service", "level >= ERROR", "names no log level"),
        ("No error logs were found for inventory-service", 'message contains "timeout"',
         "timeout"),
        ("No error logs were found for inventory-service or any other service", None,
         "other"),
        ("inventory-service is unaffected: no error logs were found", "level >= ERROR",
         "unaffected"),
    ],
    ids=["overreach-words", "level-below-the-floor", "no-level-named", "search-term-left-out",
         "other-services", "unaffected"],
)
def test_scope__a_negative_observation_wider_than_its_query_is_overstated(
        text: str, filter_text: str | None, why: str) -> None:
    problem = scope_problem(text, [_empty(filter_text)], negative=True)
    assert problem is not None and why in problem, problem


@pytest.mark.parametrize(
    ("text", "filter_text"),
    [
        ("No error logs were found for inventory-service", "level >= ERROR"),
        ("No log lines at ERROR or above were found for inventory-service", "level >= ERROR"),
        ("No fatal or error lines were logged by inventory-service", "level >= ERROR"),
        ('No error logs matching "timeout" were found for inventory-service',
         'level >= ERROR AND message contains "timeout"'),
        ("No logs were found for inventory-service", None),
    ],
)
def test_scope__a_negative_observation_within_its_query_stands(
        text: str, filter_text: str | None) -> None:
    assert scope_problem(text, [_empty(filter_text)], negative=True) is None


def test_scope__the_post_check_overstates_what_the_model_calls_direct() -> None:
    claims = [verified_claim("c1", "inventory-service logged nothing at all, not even "
                             "warnings, so it is healthy", kind=ClaimKind.NEGATIVE_OBSERVATION)]
    outcome = GatekeeperOutcome(
        result=GatekeeperResult(status="pass", severity=Severity.PASS, rules=[],
                                failed_rules=[], checked_bindings=[]),
        verified_output=VerifiedExecutorOutput(claims=claims),
        verified_evidence=[_empty("level >= ERROR")])
    checked = post_check(output(check("c1", Verification.DIRECT_OBSERVATION)),
                         build_verifier_input(outcome, query=QUERY))
    assert checked.claim_checks[0].verification is Verification.OVERSTATED
    assert "wider than its evidence" in checked.downgrades[0]


# --- an observation says only what its tool outputs say (issue 19) --------------------------

def test_unsaid__a_claim_is_read_against_the_whole_outputs_it_binds_to() -> None:
    from spec.helpers import (
        binding,
        claim,
        errors_claim,
        executor_output,
        invocations,
    )

    from pipeline.rules.gatekeeper import gatekeep
    from pipeline.rules.guards import unsaid_words

    leak = claim("c2", "checkout-service leaked memory in its product cache",
                 binding(path="$.total", matched_text="1432"))
    outcome = gatekeep(executor_output(errors_claim(), leak), invocations())
    wording = unsaid_words(outcome, invocations())
    # "logged 1432 errors, returning HTTP 500" is read against the log search, not only "1432"
    assert "c1" not in wording.unsaid and not wording.elsewhere
    assert "leaked" in wording.unsaid["c2"] and "cache" in wording.unsaid["c2"]


@pytest.mark.parametrize(("kind", "given", "expected"), [
    # a conclusion no output states is a fabricated one when given as observed
    (ClaimKind.ROOT_CAUSE, Verification.DIRECT_OBSERVATION, Verification.CONTRADICTED),
    (ClaimKind.ROOT_CAUSE, Verification.REASONABLE_INFERENCE, Verification.OVERSTATED),
    (ClaimKind.CORRELATION, Verification.DIRECT_OBSERVATION, Verification.CONTRADICTED),
    (ClaimKind.ROOT_CAUSE, Verification.OVERSTATED, Verification.OVERSTATED),
    (ClaimKind.ROOT_CAUSE, Verification.UNSUPPORTED, Verification.UNSUPPORTED),
    # an observation whose facts its outputs state, in words they do not: not seen, inferred
    (ClaimKind.FINDING, Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE),
    (ClaimKind.FINDING, Verification.REASONABLE_INFERENCE, Verification.REASONABLE_INFERENCE),
    (ClaimKind.NEGATIVE_OBSERVATION, Verification.DIRECT_OBSERVATION,
     Verification.REASONABLE_INFERENCE),
    (ClaimKind.FINDING, Verification.OVERSTATED, Verification.OVERSTATED),
    (ClaimKind.FINDING, Verification.UNSUPPORTED, Verification.UNSUPPORTED),
])
def test_unsaid__a_claim_with_unsaid_words_is_not_confirmed(
        kind: ClaimKind, given: Verification, expected: Verification) -> None:
    vi = verifier_input([("c1", "payment-db connection pool exhausted")],
                        [("c1", "payment-db connection pool exhausted")], kind=kind)
    checked = post_check(output(check("c1", given)), vi,
                         unsaid={"c1": "says what it does not cite: 'leak'"})
    assert checked.claim_checks[0].verification is expected
    if expected is not given:
        assert "'leak'" in checked.downgrades[0]


def test_unsaid__an_observation_so_worded_keeps_its_missing_facts() -> None:
    """Worded beyond its outputs and stating a fact they do not: overstated, as any claim
    missing a fact, not an inference."""
    vi = verifier_input([("c1", "payment-db connection pool exhausted (max 50)")],
                        [("c1", "payment-db connection pool exhausted (max 20)")])
    checked = post_check(output(check("c1", Verification.DIRECT_OBSERVATION)), vi,
                         unsaid={"c1": "says what it does not cite: 'leak'"})
    assert checked.claim_checks[0].verification is not Verification.REASONABLE_INFERENCE


def test_unsaid__words_only_another_output_of_the_run_uses_are_a_reading_across_it() -> None:
    """A claim bound to the log search that says "reduce", a word of the deploy's description
    only, reads across the run's outputs: `elsewhere`, not `unsaid`; a word in no output of the
    run at all stays unsaid."""
    from spec.helpers import binding, claim, executor_output, invocations

    from pipeline.rules.gatekeeper import gatekeep
    from pipeline.rules.guards import unsaid_words

    across = claim("c1", "The reduce of the payment-db connection pool shows in the errors",
                   binding())
    invented = claim("c2", "A payment-db firewall rule exhausted the connection pool", binding())
    outcome = gatekeep(executor_output(across, invented), invocations())
    wording = unsaid_words(outcome, invocations())
    assert "reduce" in wording.elsewhere["c1"] and "c1" not in wording.unsaid
    assert "firewall" in wording.unsaid["c2"] and "c2" not in wording.elsewhere


@pytest.mark.parametrize(("given", "expected"), [
    (Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE),
    (Verification.REASONABLE_INFERENCE, Verification.REASONABLE_INFERENCE),
    (Verification.UNSUPPORTED, Verification.UNSUPPORTED),
])
def test_elsewhere__a_claim_worded_from_other_outputs_is_an_inference_at_most(
        given: Verification, expected: Verification) -> None:
    vi = verifier_input([("c1", "payment-db connection pool exhausted")],
                        [("c1", "payment-db connection pool exhausted")])
    checked = post_check(output(check("c1", given)), vi,
                         elsewhere={"c1": "says what it does not cite: 'reduce'"})
    assert checked.claim_checks[0].verification is expected
    if given is Verification.DIRECT_OBSERVATION:
        assert any("other outputs of the run" in d for d in checked.downgrades)


def test_elsewhere__a_changed_value_is_still_a_contradiction() -> None:
    vi = verifier_input([("c1", "payment-db connection pool exhausted (max 30)")],
                        [("c1", "payment-db connection pool exhausted (max 20)")])
    checked = post_check(output(check("c1", Verification.DIRECT_OBSERVATION)), vi,
                         elsewhere={"c1": "says what it does not cite: 'reduce'"})
    assert checked.claim_checks[0].verification is Verification.CONTRADICTED


_INVENTED = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=5, max_size=9).map(
    lambda consonants: consonants[:2] + "o" + consonants[2:] + "ism")
"""A made-up word ("brotzism"): in no tool output, no narration word, no lexicon."""


@settings(max_examples=60, deadline=None)
@given(invented=_INVENTED, given_class=st.sampled_from(list(Verification)),
       verdict=st.sampled_from([Verdict.PASS, Verdict.LOW_CONFID]),
       kind=st.sampled_from([ClaimKind.ROOT_CAUSE, ClaimKind.CONTRIBUTING_FACTOR,
                             ClaimKind.FINDING]))
def test_unsaid__a_word_no_output_uses_reaches_no_allowed_claim_nor_direction(
        invented: str, given_class: Verification, verdict: Verdict, kind: ClaimKind) -> None:
    """Whatever the Verifier calls a claim with a word none of its outputs uses, under any
    verdict the Composer may see, the word is in no claim and no possible direction it gets."""
    from spec.helpers import binding, claim, errors_claim, executor_output, invocations

    from models.executor import ExecutorEvidenceV2
    from models.verifier import ClaimCheck
    from pipeline.rules.composer_input import build_composition
    from pipeline.rules.gatekeeper import gatekeep
    from pipeline.rules.guards import unsaid_words

    document = executor_output(
        errors_claim(),
        claim("c2", f"{invented} exhausted the payment-db connection pool",
              binding(matched_text="payment-db connection pool exhausted"), kind=kind))
    outcome = gatekeep(document, invocations())
    unsaid = unsaid_words(outcome, invocations()).unsaid
    assert invented in unsaid["c2"]
    vi = build_verifier_input(outcome, query=QUERY)
    checked = post_check(output(ClaimCheck(claim_id="c1",
                                           verification=Verification.DIRECT_OBSERVATION),
                                ClaimCheck(claim_id="c2", verification=given_class)),
                         vi, unsaid=unsaid)
    c2 = {c.claim_id: c.verification for c in checked.claim_checks}["c2"]
    assert c2 is not Verification.DIRECT_OBSERVATION
    if kind is not ClaimKind.FINDING:  # a conclusion no output states: not even inferred
        assert c2 is not Verification.REASONABLE_INFERENCE
    ci = build_composition(
        query=QUERY, verdict=verdict, claims=outcome.verified_output.claims,
        checks=checked.claim_checks, gaps=[],
        executor_output=ExecutorEvidenceV2.model_validate(document), rationale="r",
        unsaid=unsaid).composer_input
    texts = [c.text for c in ci.allowed_claims] + [h.text for h in ci.allowed_hypotheses]
    assert texts and not any(invented in t for t in texts)
