"""`pipeline.importers.evaluations`: a check as OpenTelemetry `gen_ai.evaluation.result`
events (OTLP JSON logs), parented to the span that wrote an imported trace's answer."""

from __future__ import annotations

from typing import Any

from models.check import CheckedClaim, CheckReport
from models.common import Verdict
from models.executor import ClaimKind
from models.verifier import Verification
from pipeline.importers.evaluations import EVENT_NAME, evaluation_events

ANSWER = "payment-db ran out of connections. It logged 521 errors. Roll back v2.3.1."


def _claim(claim_id: str, start: int, end: int, verification: Verification | None, *,
           action: bool = False, note: str | None = None) -> CheckedClaim:
    return CheckedClaim(claim_id=claim_id, text=ANSWER[start:end], span=(start, end),
                        kind=ClaimKind.FINDING, critical=claim_id == "c1", hedged=False,
                        action=action, verification=verification, note=note, bindings=[])


def _report(**ids: str | None) -> CheckReport:
    return CheckReport(
        run_id="r1", question="Why 500s?", format="otel", agent="gpt-4.1", verdict=Verdict.REJECT,
        status="FALLBACK", answer=ANSWER, summary="No reliable conclusion.",
        claims=[_claim("c1", 0, 34, Verification.DIRECT_OBSERVATION),
                _claim("c2", 35, 56, Verification.CONTRADICTED, note="521 differs: 512"),
                _claim("a1", 57, 74, None, action=True)], **ids)


def _attributes(record: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}


def test_evaluations__the_verdict_and_each_judged_claim_as_one_event() -> None:
    document = evaluation_events(_report(), time_unix_nano=1_700_000_000_000_000_000)
    (resource,) = document["resourceLogs"]
    records = resource["scopeLogs"][0]["logRecords"]
    assert [r["eventName"] for r in records] == [EVENT_NAME] * 3  # the action is not judged
    verdict, observed, contradicted = (_attributes(r) for r in records)
    assert verdict["gen_ai.evaluation.name"] == "verity.verdict"
    assert (verdict["gen_ai.evaluation.score.label"], verdict["gen_ai.evaluation.score.value"]) \
        == ("REJECT", 0.0)
    assert "2 claims checked" in verdict["gen_ai.evaluation.explanation"]
    assert (observed["gen_ai.evaluation.score.label"], observed["verity.claim.span"]) == (
        "direct_observation", "0-34")
    assert contradicted["gen_ai.evaluation.score.value"] == 0.0
    assert contradicted["gen_ai.evaluation.explanation"] == (
        "It logged 521 errors. — 521 differs: 512")
    assert all(r["timeUnixNano"] == "1700000000000000000" for r in records)
    assert all("traceId" not in r for r in records)


def test_evaluations__an_imported_trace_gets_its_events_on_the_answering_span() -> None:
    report = _report(trace_id="5b8efff798038103d269b633813fc60c", span_id="e1e2e3e4e5e6e7e8",
                     response_id="chatcmpl-9")
    records = evaluation_events(report, time_unix_nano=1)["resourceLogs"][0]["scopeLogs"][0][
        "logRecords"]
    assert {(r["traceId"], r["spanId"]) for r in records} == {
        ("5b8efff798038103d269b633813fc60c", "e1e2e3e4e5e6e7e8")}
    assert all(_attributes(r)["gen_ai.response.id"] == "chatcmpl-9" for r in records)
