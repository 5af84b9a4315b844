"""The offline lexical Verifier: its classification of one claim, and its whole answer."""

from __future__ import annotations

import pytest
from spec.helpers import LOG_500, QUERY, RATE_SUMMARY, evidence, verified_claim

from models.common import Verdict
from models.executor import ClaimKind
from models.gatekeeper import (
    GatekeeperOutcome,
    GatekeeperResult,
    Severity,
    VerifiedClaim,
    VerifiedEvidence,
    VerifiedExecutorOutput,
)
from models.invocation import EvidenceStatus
from models.verifier import Verification, VerifierOutput
from pipeline.agents.offline_verifier import MODEL_NAME, OfflineVerifier, classify, verify
from pipeline.prompts import load_prompt
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.serialization import canonical_bytes

EVIDENCE = [
    evidence("c1", LOG_500, evidence_id="E1"),
    evidence("c1", RATE_SUMMARY, evidence_id="E2", path="$.series[0].summary"),
    evidence("c1", "checkout-service logged 1432 errors", evidence_id="E3", path="$.summary"),
    evidence("c1", "checkout-service v2.3.1 deployed; pod checkout-7f9c-x2 restarted",
             evidence_id="E4", path="$.deployments[0].description"),
]
F, R, C, N = (ClaimKind.FINDING, ClaimKind.ROOT_CAUSE, ClaimKind.CONTRIBUTING_FACTOR,
              ClaimKind.CORRELATION)


def classified(text: str, kind: ClaimKind = F,
               items: list[VerifiedEvidence] | None = None) -> Verification:
    check, _ = classify(verified_claim("c1", text, kind=kind), EVIDENCE if items is None
                        else items)
    return check.verification


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        # every fact in its evidence: a direct observation for findings ...
        ("the 5xx rate peaked at 41.8% at 14:07", F, Verification.DIRECT_OBSERVATION),
        ("checkout-service logged 1432 errors", F, Verification.DIRECT_OBSERVATION),
        ("payment-db connection pool exhausted (max 20)", F, Verification.DIRECT_OBSERVATION),
        ("checkout-service v2.3.1 was deployed", F, Verification.DIRECT_OBSERVATION),
        # ... and a reasonable inference for conclusions or causal wording
        ("v2.3.1 exhausted the payment-db pool (max 20)", R, Verification.REASONABLE_INFERENCE),
        ("the 41.8% peak at 14:07 follows v2.3.1", C, Verification.REASONABLE_INFERENCE),
        ("the 41.8% peak at 14:07 matches v2.3.1", N, Verification.REASONABLE_INFERENCE),
        ("the 5xx rate hit 41.8% because the payment-db pool was exhausted", F,
         Verification.REASONABLE_INFERENCE),
        # a number, time, version, code or identifier that differs: contradicted
        ("checkout-service logged 1500 errors", F, Verification.CONTRADICTED),
        ("the 5xx rate peaked at 45% at 14:07", F, Verification.CONTRADICTED),
        ("the 5xx rate peaked at 41.8% at 14:09", F, Verification.CONTRADICTED),
        ("checkout-service v2.3.2 was deployed", F, Verification.CONTRADICTED),
        ("checkout-service returned HTTP 502", F, Verification.CONTRADICTED),
        ("pod checkout-7f9c-x3 restarted", F, Verification.CONTRADICTED),
        # an identifying fact the evidence never states: fabricated, so contradicted
        ("payment-db pool exhausted with ECONNRESET", F, Verification.CONTRADICTED),
        ("the pool cut came with release v3.0.0", R, Verification.CONTRADICTED),
        # an entity or a number the evidence never states: fabricated, so contradicted
        ("payment-db connection pool exhausted on redis-cache", F, Verification.CONTRADICTED),
        ("the 5xx rate of auth-api peaked at 41.8%", F, Verification.CONTRADICTED),
        ("redis-cache is unhealthy", F, Verification.CONTRADICTED),
        ("the 5xx rate peaked at 41.8% with 77 pods down", F, Verification.CONTRADICTED),
        ("latency rose by 950ms over 12 minutes", F, Verification.CONTRADICTED),
        # no facts: word overlap decides
        ("payment-db connection pool exhausted", F, Verification.DIRECT_OBSERVATION),
        ("Postgres has a known bug in this release", F, Verification.UNSUPPORTED),
        ("connection exhaustion under heavy overnight batch load", F,
         Verification.UNSUPPORTED),
    ],
    ids=["finding-all-facts", "finding-count", "finding-bare-number", "finding-version",
         "root-cause-all-facts", "contributing-factor-all-facts", "correlation-all-facts",
         "causal-wording", "count-differs", "percent-differs", "time-differs",
         "version-differs", "http-code-differs", "pod-id-differs", "error-code-invented",
         "version-invented", "entity-never-named", "other-service", "only-unknown-entity",
         "some-facts-missing", "all-facts-missing", "no-facts-words-present",
         "no-facts-external-knowledge", "no-facts-low-overlap"],
)
def test_classify(text: str, kind: ClaimKind, expected: Verification) -> None:
    assert classified(text, kind) is expected


def test_verify_reads_only_each_claims_own_evidence() -> None:
    claims = [verified_claim("c1", "payment-db connection pool exhausted (max 20)"),
              verified_claim("c2", "the 5xx rate peaked at 41.8% at 14:07")]
    swapped = [evidence("c1", RATE_SUMMARY), evidence("c2", LOG_500, evidence_id="E2")]
    answer = verify(build_verifier_input(outcome_for(claims, swapped), query=QUERY))
    # with the other's evidence each states what its own does not: c1's "20" is absent
    assert [c.verification for c in answer.claim_checks] == [
        Verification.CONTRADICTED, Verification.CONTRADICTED]
    assert [c.evidence_refs for c in answer.claim_checks] == [["E1"], ["E2"]]


def test_classify_cites_every_own_evidence_item_and_lists_missing_facts() -> None:
    check, missing = classify(
        verified_claim("c1", "the 5xx rate peaked at 41.8% with 77 pods down"), EVIDENCE)
    assert check.evidence_refs == ["E1", "E2", "E3", "E4"]
    assert [f.text for f in missing] == ["77 pods"]
    assert check.note


def outcome_for(claims: list[VerifiedClaim], items: list[VerifiedEvidence],
                severity: Severity = Severity.PASS) -> GatekeeperOutcome:
    return GatekeeperOutcome(
        result=GatekeeperResult(status="pass", severity=severity, rules=[], failed_rules=[],
                                checked_bindings=[]),
        verified_output=VerifiedExecutorOutput(claims=claims),
        verified_evidence=items,
    )


def test_verify_answers_the_rule_verdict_under_the_ceiling() -> None:
    claims = [verified_claim("c1", "checkout-service logged 1432 errors"),
              verified_claim("c2", "v2.3.1 exhausted the payment-db pool (max 20)",
                             kind=ClaimKind.ROOT_CAUSE)]
    items = [evidence("c1", "checkout-service logged 1432 errors"),
             evidence("c2", LOG_500, evidence_id="E2"),
             evidence("c2", "checkout-service v2.3.1 deployed", evidence_id="E3")]
    passed = verify(build_verifier_input(outcome_for(claims, items), query=QUERY))
    assert passed.verdict is Verdict.PASS
    assert [c.verification for c in passed.claim_checks] == [
        Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE]
    assert passed.groundedness_score == pytest.approx((2 * 1.0 + 2 * 0.7) / 4, abs=1e-3)
    assert passed.evidence_gaps == []
    capped = verify(build_verifier_input(outcome_for(claims, items, Severity.LOW_CONFID),
                                         query=QUERY))
    assert capped.verdict is Verdict.LOW_CONFID


def test_verify_reports_a_gap_for_each_weak_critical_claim() -> None:
    claims = [verified_claim("c1", "the 5xx rate peaked at 41.8% with 77 pods down"),
              verified_claim("c2", "latency rose by 950ms", critical=False),
              verified_claim("c3", "checkout-service logged 1500 errors")]
    items = [evidence("c1", RATE_SUMMARY), evidence("c2", LOG_500, evidence_id="E2"),
             evidence("c3", "checkout-service logged 1432 errors", evidence_id="E3")]
    answer = verify(build_verifier_input(outcome_for(claims, items), query=QUERY))
    assert answer.verdict is Verdict.REJECT
    assert [(g.claim_id, g.critical, g.suggested_tool) for g in answer.evidence_gaps] == [
        ("c1", True, "query_metrics")]
    assert "quantity" in answer.evidence_gaps[0].description
    assert "contradicted: 3" in answer.rationale


def test_offline_verifier_answers_its_serialized_input_with_valid_json() -> None:
    claims = [verified_claim("c1", "checkout-service logged 1432 errors")]
    items = [evidence("c1", "checkout-service logged 1432 errors")]
    verifier_input = build_verifier_input(outcome_for(claims, items), query=QUERY)
    reply = OfflineVerifier().respond(load_prompt("verifier"), canonical_bytes(verifier_input))
    assert VerifierOutput.model_validate_json(reply.text) == verify(verifier_input)
    assert OfflineVerifier.model == MODEL_NAME


def test_classify__a_negative_observation_wider_than_its_query_is_overstated() -> None:
    empty = evidence("c1", "inventory-service", path="$.scope.service",
                     service="inventory-service", evidence_status=EvidenceStatus.NO_EVIDENCE)
    empty = empty.model_copy(update={"scope": empty.scope.model_copy(
        update={"filter": "level >= ERROR"})})
    wide = verified_claim("c1", "inventory-service logged nothing at all, not even warnings",
                          kind=ClaimKind.NEGATIVE_OBSERVATION)
    bounded = verified_claim("c1", "No error logs were found for inventory-service",
                             kind=ClaimKind.NEGATIVE_OBSERVATION)
    assert classify(wide, [empty])[0].verification is Verification.OVERSTATED
    assert classify(bounded, [empty])[0].verification is Verification.DIRECT_OBSERVATION
