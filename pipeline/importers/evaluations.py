"""A check written back as OpenTelemetry `gen_ai.evaluation.result` events, so the verdicts
land beside the agent's own traces: OTLP JSON logs (the shape a collector's `otlpjsonfile`
receiver reads, one `ExportLogsServiceRequest`), one event for the answer's verdict and one
for each claim.

The event's attributes are the GenAI semantic conventions' (`gen_ai.evaluation.name`,
`gen_ai.evaluation.score.label`, `gen_ai.evaluation.score.value`,
`gen_ai.evaluation.explanation`, and `gen_ai.response.id` when the source named one). Events
of a run imported from a trace carry its trace id and the id of the span that wrote the
answer, so a backend shows them on that span.

Scores: the verdict is 1 (PASS), 0.5 (LOW_CONFID) or 0 (REJECT); a claim is 1 when observed,
0.75 inferred, 0.5 overstated, 0.25 unsupported or unknown, 0 contradicted."""

from __future__ import annotations

from typing import Any

from models.check import CheckedClaim, CheckReport
from models.verifier import Verification

EVENT_NAME = "gen_ai.evaluation.result"
VERDICT_EVALUATION = "verity.verdict"
CLAIM_EVALUATION = "verity.claim"

VERDICT_SCORE = {"PASS": 1.0, "LOW_CONFID": 0.5, "REJECT": 0.0}
CLAIM_SCORE = {
    Verification.DIRECT_OBSERVATION: 1.0, Verification.REASONABLE_INFERENCE: 0.75,
    Verification.OVERSTATED: 0.5, Verification.UNSUPPORTED: 0.25,
    Verification.EXTERNAL_UNKNOWN: 0.25, Verification.CONTRADICTED: 0.0,
}
_SEVERITY_INFO = 9


def evaluation_events(report: CheckReport, *, time_unix_nano: int, version: str = ""
                      ) -> dict[str, Any]:
    """The report as one OTLP JSON logs document (events at `time_unix_nano`)."""
    trace_id, span_id, response_id = report.trace_id, report.span_id, report.response_id
    records = [_record(VERDICT_EVALUATION, report.verdict.value if report.verdict else None,
                       VERDICT_SCORE.get(report.verdict.value) if report.verdict else None,
                       _verdict_explanation(report), time_unix_nano, trace_id, span_id,
                       response_id, extra={"verity.run_id": report.run_id})]
    for claim in report.claims:
        if claim.action or claim.verification is None:
            continue
        records.append(_record(
            CLAIM_EVALUATION, claim.verification.value, CLAIM_SCORE[claim.verification],
            _claim_explanation(claim), time_unix_nano, trace_id, span_id, response_id,
            extra={"verity.run_id": report.run_id, "verity.claim.id": claim.claim_id,
                   "verity.claim.span": f"{claim.span[0]}-{claim.span[1]}",
                   "verity.claim.critical": claim.critical}))
    return {"resourceLogs": [{
        "resource": {"attributes": [_attribute("service.name", "verity")]},
        "scopeLogs": [{"scope": {"name": "verity.checks", "version": version},
                       "logRecords": records}],
    }]}


def _record(name: str, label: str | None, score: float | None, explanation: str,
            time_unix_nano: int, trace_id: str | None, span_id: str | None,
            response_id: str | None, *, extra: dict[str, Any]) -> dict[str, Any]:
    attributes = [_attribute("gen_ai.evaluation.name", name)]
    if label is not None:
        attributes.append(_attribute("gen_ai.evaluation.score.label", label))
    if score is not None:
        attributes.append(_attribute("gen_ai.evaluation.score.value", score))
    attributes.append(_attribute("gen_ai.evaluation.explanation", explanation))
    if response_id:
        attributes.append(_attribute("gen_ai.response.id", response_id))
    attributes += [_attribute(key, value) for key, value in extra.items()]
    record: dict[str, Any] = {
        "timeUnixNano": str(time_unix_nano), "observedTimeUnixNano": str(time_unix_nano),
        "severityNumber": _SEVERITY_INFO, "severityText": "INFO", "eventName": EVENT_NAME,
        "attributes": attributes,
    }
    if trace_id and span_id:
        record |= {"traceId": trace_id, "spanId": span_id}
    return record


def _attribute(key: str, value: str | float | bool) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _verdict_explanation(report: CheckReport) -> str:
    claims = [c for c in report.claims if not c.action]
    counted: dict[str, int] = {}
    for claim in claims:
        label = claim.verification.value if claim.verification else "not judged"
        counted[label] = counted.get(label, 0) + 1
    parts = ", ".join(f"{n} {label.replace('_', ' ')}" for label, n in sorted(counted.items()))
    return f"{len(claims)} claims checked against the run's tool outputs: {parts}"


def _claim_explanation(claim: CheckedClaim) -> str:
    text = " ".join(claim.text.split())
    text = text if len(text) <= 300 else text[:299] + "…"
    return f"{text} — {claim.note}" if claim.note else text
