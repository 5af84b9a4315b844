"""The shipped sample bundles verify to exactly their documented results, for the right reason.

Every bundle in `samples/bundles/` has an expectation here (a new bundle without one fails).
Each expectation pins the outcome (status, verdict, fallback type and reason, stage statuses),
the Gatekeeper audit (severity, failed rules, the rule of every checked binding), the claim
checks, and properties of the answer. A control test per bundle removes the one defect the
bundle is about and shows the result changes, so the bundle fails because of its intended rule.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from models.bundle import RunBundle, RunResult
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.rules.composer_input import BEYOND_GAP
from pipeline.rules.rendering import NO_RELIABLE_CONCLUSION
from pipeline.rules.verdict import rule_verdict
from pipeline.verification import VerifiedRun, load_bundle, verify_bundle

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
NOT_VALIDATED = "The investigation's evidence could not be validated, so no diagnosis is given."

Binding = tuple[str, int, str | None]
"""(claim_id, binding index, failed rule or None when it passed)."""


@dataclass(frozen=True)
class Expected:
    """What one bundle verifies to."""

    status: str
    verdict: str | None
    fallback_type: str | None
    failure_reason: str | None
    executor_status: str
    verifier_status: str
    composer_status: str
    severity: str | None
    failed_rules: list[str]
    bindings: list[Binding]
    claim_checks: dict[str, str]
    summary: str
    answer_has: list[str] = field(default_factory=list)
    answer_lacks: list[str] = field(default_factory=list)
    audit_lacks: list[str] = field(default_factory=list)


EXPECTED: dict[str, Expected] = {
    "pass.json": Expected(
        status="SUCCESS", verdict="PASS", fallback_type=None, failure_reason=None,
        executor_status="OK", verifier_status="COMPLETED", composer_status="OK",
        severity="pass", failed_rules=[],
        bindings=[("c1", 0, None), ("c1", 1, None), ("c2", 0, None), ("c3", 0, None),
                  ("c4", 0, None), ("c4", 1, None)],
        claim_checks={"c1": "direct_observation", "c2": "direct_observation",
                      "c3": "direct_observation", "c4": "reasonable_inference"},
        summary="Root cause: Deploy v2.3.1 cut the payment-db connection pool to 20, and the "
        "exhausted pool caused the HTTP 500 errors",
        answer_has=["Confirmed findings:", "41.8%", "Evidence gaps:"],
    ),
    "gatekeeper_reject.json": Expected(
        status="FALLBACK", verdict=None, fallback_type="EVIDENCE_VALIDATION_FAILED",
        failure_reason="GATEKEEPER_REJECT",
        executor_status="OK", verifier_status="NOT_RUN", composer_status="NOT_RUN",
        severity="reject",
        failed_rules=["evidence.invocation_ref", "evidence.invocation_status", "evidence.path",
                      "evidence.matched_text"],
        bindings=[
            ("c1", 0, "evidence.invocation_ref"),  # fabricated tool_call_id
            ("c2", 0, "evidence.invocation_ref"),  # get_events cited as search_logs
            ("c3", 0, "evidence.path"),  # $.hits[5] of two hits
            ("c3", 1, "evidence.path"),  # wildcard
            ("c4", 0, "evidence.invocation_status"),  # the query_metrics call errored
            ("c5", 0, "evidence.matched_text"),  # "statuscode: 503" is not in the event
        ],
        claim_checks={},
        summary=NOT_VALIDATED + " Nothing from the unvalidated draft is shown.",
        answer_lacks=["v4.2.0", "v4.1.3", "nil pointer", "CrashLoopBackOff", "503", "98%",
                      "512Mi", "Roll back", "Memory metrics"],
        audit_lacks=["nil pointer", "v4.2.0 was deployed", "HTTP 503"],
    ),
    "low_confid_ceiling.json": Expected(
        status="SUCCESS", verdict="LOW_CONFID", fallback_type=None, failure_reason=None,
        executor_status="OK", verifier_status="COMPLETED", composer_status="OK",
        severity="low_confid",
        failed_rules=["evidence.invocation_ref", "evidence.path", "evidence.matched_text"],
        bindings=[
            ("c1", 0, None), ("c2", 0, None), ("c2", 1, None),
            ("c2", 2, "evidence.path"),  # field `msg` does not exist
            ("c3", 0, "evidence.invocation_ref"),  # get_deployments vs list_deployments
            ("c4", 0, "evidence.path"),  # $.deployments[1] of one deployment
            ("c4", 1, "evidence.matched_text"),  # sentence not in the runbook excerpt
        ],
        claim_checks={"c1": "direct_observation", "c2": "direct_observation"},
        summary="The evidence is incomplete, so no root cause is confirmed.",
        answer_has=[
            "Confirmed information:\n- The p99 latency of search-api rose from a 180ms "
            "baseline to 2400ms at 07:42",
            "Possible directions (not confirmed):\n- Slow elasticsearch queries on products-v7",
            "Evidence gaps:\n- Elasticsearch cluster metrics",
        ],
        answer_lacks=["v5.14.0", "fuzzy", "Fuzzy", "504 Gateway Timeout", "07:30"],
    ),
    "contradiction.json": Expected(
        status="FALLBACK", verdict="REJECT", fallback_type="SEMANTIC_UNSUPPORTED",
        failure_reason="VERIFIER_REJECT",
        executor_status="OK", verifier_status="COMPLETED", composer_status="NOT_RUN",
        severity="pass", failed_rules=[],
        bindings=[("c1", 0, None), ("c2", 0, None), ("c3", 0, None), ("c3", 1, None),
                  ("c4", 0, None), ("c4", 1, None)],
        claim_checks={"c1": "direct_observation", "c2": "contradicted",
                      "c3": "direct_observation", "c4": "reasonable_inference"},
        summary=NO_RELIABLE_CONCLUSION,
        answer_has=["The p95 latency of cart-service rose from a 95ms baseline to 870ms",
                    "Alert CartServiceLatencyHigh has been firing since 10:18"],
        answer_lacks=["45%", "12.3%", "throttling", "Root cause", "is the cause",
                      "CPU limit", "Possible directions"],
    ),
    "malformed_executor_output.json": Expected(
        status="FALLBACK", verdict=None, fallback_type="EVIDENCE_VALIDATION_FAILED",
        failure_reason="EXECUTOR_INVALID_OUTPUT",
        executor_status="INVALID_OUTPUT", verifier_status="NOT_RUN", composer_status="NOT_RUN",
        severity=None, failed_rules=[], bindings=[], claim_checks={},
        summary=NOT_VALIDATED + " Nothing from the unvalidated draft is shown.",
        answer_lacks=["rate-limiting", "421", "3 attempts", "```", "quota", "structured report"],
        audit_lacks=["rate-limiting", "structured report", "```"],
    ),
    "no_evidence.json": Expected(
        status="SUCCESS", verdict="PASS", fallback_type=None, failure_reason=None,
        executor_status="OK", verifier_status="COMPLETED", composer_status="OK",
        severity="pass", failed_rules=[],
        bindings=[("c1", 0, None), ("c1", 1, None), ("c1", 2, None), ("c1", 3, None),
                  ("c2", 0, None), ("c2", 1, None), ("c2", 2, None)],
        claim_checks={"c1": "direct_observation", "c2": "direct_observation"},
        summary="Confirmed findings are listed below; no root cause is confirmed.",
        answer_has=[
            "- No error logs were found for billing-service between 00:00 and 06:00 UTC",
            "- No alerts fired for billing-service between 00:00 and 06:00 UTC",
        ],
        answer_lacks=["Root cause:"],
    ),
    "removed_fields.json": Expected(
        status="FALLBACK", verdict=None, fallback_type="EVIDENCE_VALIDATION_FAILED",
        failure_reason="GATEKEEPER_REJECT",
        executor_status="OK", verifier_status="NOT_RUN", composer_status="NOT_RUN",
        severity="reject", failed_rules=["schema.executor_v2"],
        bindings=[("c1", 0, None), ("c2", 0, None), ("c2", 1, None), ("c2", 2, None),
                  ("c3", 0, None), ("c3", 1, None)],
        claim_checks={},
        summary=NOT_VALIDATED + " Nothing from the unvalidated draft is shown.",
        answer_lacks=["December", "8Gi", "rerun", "OOMKilled", "2Gi"],
        audit_lacks=["December invoice volume", "8Gi", "nothing else needs to change"],
    ),
}


def _bundle_names() -> list[str]:
    return sorted(path.name for path in BUNDLES.glob("*.json"))


@cache
def _bundle(name: str) -> RunBundle:
    return load_bundle((BUNDLES / name).read_text(encoding="utf-8"))


def _verify(bundle: RunBundle) -> VerifiedRun:
    return verify_bundle(bundle, verifier=OfflineVerifier(), composer=TemplateComposer())


@cache
def _run(name: str) -> VerifiedRun:
    return _verify(_bundle(name))


def _with_output(name: str, document: dict[str, Any] | str) -> RunBundle:
    raw = document if isinstance(document, str) else json.dumps(document)
    return _bundle(name).model_copy(update={"executor_output_raw": raw})


def _document(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_bundle(name).executor_output_raw)
    return document


def _answer_text(result: RunResult) -> str:
    return result.final_answer.model_dump_json()


def test_samples__every_bundle_has_an_expectation() -> None:
    assert _bundle_names() == sorted(EXPECTED)
    # each bundle is a different incident
    assert len({_bundle(name).query for name in EXPECTED}) == len(EXPECTED)


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__bundle_is_realistic(name: str) -> None:
    bundle = _bundle(name)
    tools = {"search_logs", "query_metrics", "list_alerts", "list_deployments", "get_events",
             "search_runbooks"}
    assert bundle.invocations
    for invocation in bundle.invocations:
        assert invocation.tool_name in tools
        assert re.fullmatch(r"toolu_01[A-Za-z0-9]{6,}", invocation.tool_call_id)


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__outcome(name: str) -> None:
    expected = EXPECTED[name]
    result = _run(name).result
    evaluation = result.self_evaluation.verifier_evaluation
    assert (result.status, result.verdict, result.fallback_type) == (
        expected.status, expected.verdict, expected.fallback_type
    )
    assert evaluation.failure_reason == expected.failure_reason
    assert evaluation.fallback_type == expected.fallback_type
    assert (evaluation.executor_status, evaluation.verifier_status,
            evaluation.composer_status) == (expected.executor_status,
                                            expected.verifier_status, expected.composer_status)
    assert evaluation.verdict == evaluation.effective_verdict == expected.verdict
    if expected.verifier_status == "NOT_RUN":
        assert evaluation.model_verdict is None
        assert evaluation.claim_checks == []
        assert evaluation.facts_checked == []
        assert not any(stage == "verify" for stage, _, _ in _run(name).events)


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__gatekeeper_audit(name: str) -> None:
    expected = EXPECTED[name]
    evaluation = _run(name).result.self_evaluation.verifier_evaluation
    audit = evaluation.gatekeeper_result
    if expected.severity is None:
        assert audit is None
        assert evaluation.executor_structured_output is None
        return
    assert audit is not None
    assert audit.severity == expected.severity
    assert [rule.value for rule in audit.failed_rules] == expected.failed_rules
    assert audit.status == ("pass" if expected.severity == "pass" else "fail")
    checked = [(b.claim_id, b.index, b.rule.value if b.rule else None)
               for b in audit.checked_bindings]
    assert checked == expected.bindings
    assert all((b.status == "pass") == (b.rule is None) for b in audit.checked_bindings)


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__claim_checks(name: str) -> None:
    evaluation = _run(name).result.self_evaluation.verifier_evaluation
    checks = {c.claim_id: c.verification.value for c in evaluation.claim_checks}
    assert checks == EXPECTED[name].claim_checks
    assert evaluation.downgrades == []


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__answer(name: str) -> None:
    expected = EXPECTED[name]
    result = _run(name).result
    answer = _answer_text(result)
    assert result.final_answer.answer_summary == expected.summary
    assert result.final_answer.user_facing_answer.startswith(f"Question: {_bundle(name).query}")
    for text in expected.answer_has:
        assert text in result.final_answer.user_facing_answer
    for text in expected.answer_lacks:
        assert text not in answer
    audit = result.self_evaluation.model_dump_json()
    for text in expected.audit_lacks:
        assert text not in audit


@pytest.mark.parametrize("name", _bundle_names())
def test_samples__no_text_from_withheld_claims(name: str) -> None:
    """A claim the Verifier does not allow (or never saw) is not in the answer, in any form."""
    result = _run(name).result
    answer = _answer_text(result)
    allowed = set()
    if result.self_evaluation.verifier_evaluation.composer_status == "OK" or (
        result.fallback_type == "SEMANTIC_UNSUPPORTED"
    ):
        allowed = {c.claim_id for c in result.self_evaluation.verifier_evaluation.claim_checks
                   if c.verification.value == "direct_observation"}
        if result.verdict != "REJECT":
            allowed |= {c.claim_id for c in result.self_evaluation.verifier_evaluation.claim_checks
                        if c.verification.value == "reasonable_inference"}
    try:
        claims = _document(name)["claims"]
    except ValueError:
        claims = []
    for claim in claims:
        if claim["claim_id"] not in allowed:
            assert claim["text"] not in answer, claim["claim_id"]


# Controls: remove the one defect and the result changes, so the defect is what decides it.


def test_samples__gatekeeper_reject_control_fixed_bindings_pass() -> None:
    document = _document("gatekeeper_reject.json")
    bundle = _bundle("gatekeeper_reject.json")
    events = bundle.invocations[0].tool_call_id
    document["claims"] = [document["claims"][1]]
    document["claims"][0]["evidence_bindings"][0]["tool_name"] = "get_events"
    document["claims"][0]["evidence_bindings"][0]["invocation_id"] = events
    document["claims"][0]["text"] = (
        "Kubernetes is backing off restarting the failed orders-worker container"
    )
    document["hypotheses"] = document["recommended_actions"] = []
    run = _verify(_with_output("gatekeeper_reject.json", document))
    audit = run.result.self_evaluation.verifier_evaluation.gatekeeper_result
    assert audit is not None and audit.severity == "pass"
    assert run.result.status == "SUCCESS"


def test_samples__low_confid_is_the_ceiling_not_the_claims() -> None:
    run = _run("low_confid_ceiling.json")
    evaluation = run.result.self_evaluation.verifier_evaluation
    assert evaluation.gatekeeper_result is not None
    assert evaluation.verdict_ceiling == "LOW_CONFID"
    assert evaluation.executor_structured_output is not None
    claims = evaluation.executor_structured_output.claims
    assert [c.claim_id for c in claims] == ["c1", "c2"]
    assert all(c.critical for c in claims)
    # Every verified critical claim is a direct observation: the rules alone would give PASS.
    assert rule_verdict(claims, evaluation.claim_checks) == "PASS"
    # The Verifier saw only passed bindings.
    passed = {(b.invocation_id, b.path) for b in evaluation.gatekeeper_result.checked_bindings
              if b.status == "pass"}
    assert [e.evidence_id for e in evaluation.verified_evidence] == ["E1", "E2", "E3"]
    assert {(e.invocation_id, e.path) for e in evaluation.verified_evidence} == passed
    # Without the failing bindings the same claims verify to PASS.
    document = _document("low_confid_ceiling.json")
    document["claims"] = document["claims"][:2]
    document["claims"][1]["evidence_bindings"] = document["claims"][1]["evidence_bindings"][:2]
    control = _verify(_with_output("low_confid_ceiling.json", document)).result
    assert (control.status, control.verdict) == ("SUCCESS", "PASS")


def test_samples__contradiction_is_the_misquoted_number() -> None:
    check = next(c for c in _run("contradiction.json").result.self_evaluation
                 .verifier_evaluation.claim_checks if c.claim_id == "c2")
    assert check.verification == "contradicted"
    raw = _bundle("contradiction.json").executor_output_raw
    assert raw.count("45%") == 1
    control = _verify(_with_output("contradiction.json", raw.replace("45%", "12.3%"))).result
    assert (control.status, control.verdict) == ("SUCCESS", "PASS")
    assert control.final_answer.answer_summary.startswith("Root cause: Severe CPU throttling")


def test_samples__malformed_output_is_the_fence_and_prose() -> None:
    evaluation = _run("malformed_executor_output.json").result.self_evaluation
    assert evaluation.rule_evaluation["parse_failure"] == "not_json"
    raw = _bundle("malformed_executor_output.json").executor_output_raw
    fenced = re.search(r"```json\n(.*)\n```", raw, re.DOTALL)
    assert fenced is not None and not raw.startswith("{")
    control = _verify(_with_output("malformed_executor_output.json", fenced.group(1))).result
    # parsed, the draft verifies; its root cause ("the mail provider is rate-limiting") is
    # worded beyond every output it binds to, so it is neither confirmed nor shown
    assert (control.status, control.verdict) == ("SUCCESS", "LOW_CONFID")
    answer = control.final_answer.user_facing_answer
    assert "421 4.7.0 Try again later" in answer
    assert "rate-limiting" not in answer and BEYOND_GAP in answer


def test_samples__no_evidence_claims_bind_to_the_scope() -> None:
    bundle = _bundle("no_evidence.json")
    assert {inv.evidence_status for inv in bundle.invocations} == {"NO_EVIDENCE"}
    evaluation = _run("no_evidence.json").result.self_evaluation.verifier_evaluation
    assert {e.evidence_status for e in evaluation.verified_evidence} == {"NO_EVIDENCE"}
    assert all(re.match(r"\$(\.scope|\['scope'\])", e.path) for e in evaluation.verified_evidence)
    # The same claims as FINDINGs break rule evidence.no_evidence_kind.
    document = _document("no_evidence.json")
    for claim in document["claims"]:
        claim["kind"] = "FINDING"
    control = _verify(_with_output("no_evidence.json", document)).result
    audit = control.self_evaluation.verifier_evaluation.gatekeeper_result
    assert audit is not None and audit.failed_rules == ["evidence.no_evidence_kind"]
    assert control.fallback_type == "EVIDENCE_VALIDATION_FAILED"


def test_samples__removed_fields_are_the_only_defect() -> None:
    document = _document("removed_fields.json")
    assert {"diagnosis_summary", "user_facing_answer"} <= set(document)
    audit = _run("removed_fields.json").result.self_evaluation.verifier_evaluation
    assert audit.gatekeeper_result is not None
    assert audit.gatekeeper_result.errors == [
        "schema.executor_v2: removed field 'diagnosis_summary' is present",
        "schema.executor_v2: removed field 'user_facing_answer' is present",
    ]
    del document["diagnosis_summary"], document["user_facing_answer"]
    control = _verify(_with_output("removed_fields.json", document)).result
    assert (control.status, control.verdict) == ("SUCCESS", "PASS")
