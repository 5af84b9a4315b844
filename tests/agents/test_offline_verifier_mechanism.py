"""The offline Verifier's mechanism rule: a root cause drawn from several sources must show how
its cause produced its effect, not only that one followed the other.

Each case is one verification of a small verified projection: the sources are the tool
invocations the evidence comes from, each with its query scope, as the Gatekeeper hands them on.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from models.common import Verdict
from models.executor import ClaimKind, ClaimStatus
from models.gatekeeper import (
    GatekeeperOutcome,
    GatekeeperResult,
    Severity,
    VerifiedClaim,
    VerifiedEvidence,
    VerifiedExecutorOutput,
)
from models.invocation import EvidenceStatus, QueryScope, TimeWindow
from models.verifier import Verification, VerifierOutput
from pipeline.agents.offline_verifier import mechanism_link, verify
from pipeline.agents.planner import OfflinePlanner
from pipeline.rules.routing import valid_critical_gaps
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.tools import default_registry

QUERY = "Why is catalog-service returning 503s?"
WINDOW = TimeWindow(start="2026-12-09T09:00:00Z", end="2026-12-09T11:00:00Z")
DEPLOY = ("catalog-service v4.2.0 deployed at 2026-12-09T10:12:30Z (previous v4.1.3) by dana.r: "
          "prefetch prices from pricing-api for every product of a listing and raise the "
          "pricing-api client pool from 8 to 64 connections")
ERRORS = ("322 ERROR lines from catalog-service between 2026-12-09T10:13:21Z and "
          "2026-12-09T10:59:57Z: returning HTTP 503 Service Unavailable for GET /api/products: "
          "upstream price lookup rejected with 429 Too Many Requests")
ROOT = ("Deploy catalog-service v4.2.0 at 10:12 UTC (prefetch prices from pricing-api for every "
        "product of a listing and raise the pricing-api client pool from 8 to 64 connections) "
        "caused the problems that began at 10:13 UTC: catalog-service logged 322 ERROR lines "
        "from 10:13 UTC such as 'returning HTTP 503 Service Unavailable for GET /api/products: "
        "upstream price lookup rejected with 429 Too Many Requests'")
PRICING_RATE = ("http_requests_per_second of pricing-api: baseline mean 45.8 rps; in window "
                "peak 346 rps at 2026-12-09T10:17:00Z; shifted up from baseline at "
                "2026-12-09T10:14:00Z")
PRICING_STEADY = ("http_latency_p99_ms of pricing-api: baseline mean 38 ms; in window mean "
                  "38 ms; no shift from baseline")


@dataclass(frozen=True)
class Source:
    """One tool invocation: its id, tool and the service its query was about."""

    invocation_id: str
    tool_name: str
    service: str | None


DEPLOYS = Source("toolu_01DEPLOYS", "list_deployments", "catalog-service")
LOGS = Source("toolu_01LOGS", "search_logs", "catalog-service")
PRICING = Source("toolu_01PRICING", "query_metrics", "pricing-api")
ORDERS_LOGS = Source("toolu_01ORDERS", "search_logs", "orders-api")


class Projection:
    """Builds verified claims and their evidence, numbering evidence ids as the Gatekeeper."""

    def __init__(self) -> None:
        self.claims: list[VerifiedClaim] = []
        self.evidence: list[VerifiedEvidence] = []

    def claim(self, claim_id: str, text: str, *bound: tuple[Source, str],
              kind: ClaimKind = ClaimKind.FINDING, critical: bool = True) -> Projection:
        self.claims.append(VerifiedClaim(claim_id=claim_id, text=text, kind=kind,
                                         critical=critical, status=ClaimStatus.CONFIRMED))
        for source, matched in bound:
            self.evidence.append(VerifiedEvidence(
                evidence_id=f"E{len(self.evidence) + 1}", claim_id=claim_id,
                invocation_id=source.invocation_id, tool_name=source.tool_name,
                path="$.summary", matched_text=matched,
                evidence_status=EvidenceStatus.EVIDENCE_FOUND,
                scope=QueryScope(service=source.service, window=WINDOW)))
        return self

    def root(self, text: str, *bound: tuple[Source, str]) -> Projection:
        return self.claim("r1", text, *bound, kind=ClaimKind.ROOT_CAUSE)

    def verify(self, severity: Severity = Severity.PASS) -> VerifierOutput:
        outcome = GatekeeperOutcome(
            result=GatekeeperResult(status="pass", severity=severity, rules=[],
                                    failed_rules=[], checked_bindings=[]),
            verified_output=VerifiedExecutorOutput(claims=self.claims),
            verified_evidence=self.evidence)
        return verify(build_verifier_input(outcome, query=QUERY))


def _check(answer: VerifierOutput, claim_id: str = "r1") -> Verification:
    return next(c.verification for c in answer.claim_checks if c.claim_id == claim_id)


def _correlation_only() -> Projection:
    """The deploy and the errors that followed it, with nothing tying them but the time."""
    return (Projection()
            .claim("c1", ERRORS, (LOGS, ERRORS))
            .claim("c2", DEPLOY, (DEPLOYS, DEPLOY))
            .root(ROOT, (DEPLOYS, DEPLOY), (LOGS, ERRORS)))


# ---- the rule fires on a root cause that rests on timing alone -----------------------------


def test_mechanism__correlation_only_root_cause_is_overstated_with_a_critical_gap() -> None:
    answer = _correlation_only().verify()
    assert _check(answer) is Verification.OVERSTATED
    assert _check(answer, "c1") is _check(answer, "c2") is Verification.DIRECT_OBSERVATION
    assert answer.verdict is Verdict.LOW_CONFID
    [gap] = answer.evidence_gaps
    assert (gap.claim_id, gap.critical, gap.suggested_tool) == ("r1", True, "query_metrics")
    assert "time alone" in gap.description and "pricing-api" in gap.description
    assert "catalog-service" not in gap.description  # it names what to look at, nothing else
    registry = default_registry()
    assert valid_critical_gaps(answer.evidence_gaps, verified_claim_ids={"c1", "c2", "r1"},
                               known_tools=registry.names()) == [gap]


def test_mechanism__the_gap_plans_the_metrics_of_the_component_it_names() -> None:
    gaps = _correlation_only().verify().evidence_gaps
    plan = OfflinePlanner().plan(QUERY, registry=default_registry(), gaps=gaps)
    assert plan.evidence_gap_only
    assert [(s.tool_name, s.arguments) for s in plan.steps] == [
        ("query_metrics", {"service": "pricing-api"})]


# ---- ... and not otherwise ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        pytest.param(
            "Deploy checkout-service v2.3.1 cut the payment-db connection pool to 20, and "
            "checkout-service logged 'payment-db connection pool exhausted (max 20)'",
            [(Source("d", "list_deployments", "checkout-service"),
              "checkout-service v2.3.1: reduce payment-db connection pool size from 50 to 20"),
             (Source("l", "search_logs", "checkout-service"),
              "checkout-service: payment-db connection pool exhausted (max 20)")],
            id="errors-name-the-component-the-change-names"),
        pytest.param(
            "Deploy inventory-service v5.1.0 lowered the memory limit to 512Mi: inventory-service "
            "pods were OOMKilled with memory limit 512Mi",
            [(Source("d", "list_deployments", "inventory-service"),
              "inventory-service v5.1.0: lower container memory limit from 1024Mi to 512Mi"),
             (Source("e", "get_events", "inventory-service"),
              "21 OOMKilled events, e.g. Container inventory-service was OOMKilled (exit code "
              "137); memory limit 512Mi")],
            id="events-state-the-value-the-change-set"),
        pytest.param(
            "pricing-api is where the problems start: orders-api logged 'pricing-api timed out', "
            "and http_requests_per_second of pricing-api shifted up from baseline at 10:14 UTC",
            [(ORDERS_LOGS, "orders-api: POST /api/orders failed: pricing-api timed out"),
             (PRICING, PRICING_RATE)],
            id="dependency-named-by-the-errors-shows-its-own-anomaly"),
        pytest.param(
            "Deploy catalog-service v4.2.0 at 10:12 UTC caused the problems that began at "
            "10:13 UTC: catalog-service logged 322 ERROR lines",
            [(DEPLOYS, DEPLOY), (LOGS, ERRORS)],
            id="names-no-component-beyond-the-subject"),
        pytest.param(
            "Memory use of ledger-export reached its 2Gi limit, so the container was OOMKilled",
            [(Source("m", "query_metrics", "ledger-export"), "peak 2Gi (100% of limit)"),
             (Source("e", "get_events", "ledger-export"), "OOMKilled")],
            id="two-signals-of-one-service-explain-each-other"),
        pytest.param(
            "Deploy catalog-service v4.2.0 at 10:12 UTC caused the 503 errors",
            [(LOGS, "catalog-service v4.2.0 deployed at 10:12:30: returning HTTP 503 Service "
              "Unavailable")],
            id="one-source-is-not-a-correlation"),
    ],
)
def test_mechanism__a_root_cause_whose_sources_share_a_fact_stays_an_inference(
    text: str, bound: list[tuple[Source, str]]
) -> None:
    answer = Projection().root(text, *bound).verify()
    assert _check(answer) is Verification.REASONABLE_INFERENCE
    assert answer.evidence_gaps == []


def test_mechanism__only_root_causes_are_held_to_a_mechanism() -> None:
    text = "catalog-service v4.2.0 went out at 10:12 UTC and the 503 errors began at 10:13 UTC"
    for kind in (ClaimKind.FINDING, ClaimKind.CORRELATION, ClaimKind.CONTRIBUTING_FACTOR):
        answer = Projection().claim("c1", text, (DEPLOYS, DEPLOY), (LOGS, ERRORS),
                                    kind=kind).verify()
        assert _check(answer, "c1") is not Verification.OVERSTATED
        assert answer.evidence_gaps == []


def test_mechanism__time_and_the_common_subject_are_not_a_link() -> None:
    link = mechanism_link(ROOT, _correlation_only().evidence[2:])
    assert not link.shown
    assert link.subjects == ["catalog-service"]
    assert [f.text for f in link.components] == ["pricing-api"]
    assert link.sources == {DEPLOYS.invocation_id, LOGS.invocation_id}


# ---- corroboration: a verified critical finding on the component the claim names ------------


def test_mechanism__a_critical_finding_on_the_component_corroborates_the_root_cause() -> None:
    answer = (_correlation_only()
              .claim("g1-c1", PRICING_RATE, (PRICING, PRICING_RATE))
              .verify())
    check = next(c for c in answer.claim_checks if c.claim_id == "r1")
    assert check.verification is Verification.REASONABLE_INFERENCE
    assert check.evidence_refs == ["E3", "E4", "E5"]  # its own two and the finding's
    assert "pricing-api" in (check.note or "")
    assert answer.evidence_gaps == [] and answer.verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("text", "source", "kind", "critical"),
    [
        pytest.param(PRICING_RATE, PRICING, ClaimKind.FINDING, False, id="not-critical"),
        pytest.param(PRICING_STEADY, PRICING, ClaimKind.NEGATIVE_OBSERVATION, True,
                     id="a-negative-observation"),
        pytest.param(PRICING_RATE + " with 77 pods down", PRICING, ClaimKind.FINDING, True,
                     id="not-a-direct-observation"),
        pytest.param("catalog-service's pricing client pool of 64 connections", DEPLOYS,
                     ClaimKind.FINDING, True, id="from-the-root-causes-own-source"),
        pytest.param("http_error_rate of catalog-service shifted up at 10:14 UTC",
                     Source("toolu_01ERRRATE", "query_metrics", "catalog-service"),
                     ClaimKind.FINDING, True, id="about-the-subject-not-the-component"),
    ],
)
def test_mechanism__what_does_not_corroborate(
    text: str, source: Source, kind: ClaimKind, critical: bool
) -> None:
    matched = text.removesuffix(" with 77 pods down")
    if source is DEPLOYS:
        matched = DEPLOY
    answer = (_correlation_only()
              .claim("g1-c1", text, (source, matched), kind=kind, critical=critical)
              .verify())
    assert _check(answer) is Verification.OVERSTATED
    assert "r1" in [g.claim_id for g in answer.evidence_gaps]
    # a critical finding whose "77 pods" its evidence lacks is fabricated: REJECT, not LOW_CONFID
    fabricated = text.endswith(" with 77 pods down")
    assert answer.verdict is (Verdict.REJECT if fabricated else Verdict.LOW_CONFID)


def test_mechanism__a_low_confid_ceiling_still_caps_a_corroborated_root_cause() -> None:
    answer = (_correlation_only().claim("g1-c1", PRICING_RATE, (PRICING, PRICING_RATE))
              .verify(Severity.LOW_CONFID))
    assert _check(answer) is Verification.REASONABLE_INFERENCE
    assert answer.verdict is Verdict.LOW_CONFID
