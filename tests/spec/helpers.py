"""Builders for spec and pipeline tests: invocations, Executor outputs, model replies, runs.

Everything here is plain data. Executor outputs are built as dicts (what the Executor's JSON
decodes to) so a test can add removed fields or break the shape; `bundle()` serializes them
exactly as the Executor would have returned them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from models.bundle import RunBundle
from models.common import Intent, Verdict
from models.composer import AllowedClaim, AllowedHypothesis, ComposerAction, ComposerInput
from models.executor import ClaimKind, ClaimStatus
from models.gatekeeper import VerifiedClaim, VerifiedEvidence
from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    Projection,
    QueryScope,
    TimeWindow,
    ToolInvocation,
)
from models.verifier import ClaimCheck, EvidenceGap, RetryContext, Verification
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.model import Model
from pipeline.verification import VerifiedRun, verify_bundle
from tests.doubles import Scripted

QUERY = "Why is checkout-service returning 500s?"
WINDOW = TimeWindow(start="2026-11-30T14:00:00Z", end="2026-11-30T15:00:00Z")

LOGS_ID = "toolu_01LOGS0001"
METRICS_ID = "toolu_01METR0001"
DEPLOYS_ID = "toolu_01DEPL0001"
EMPTY_ID = "toolu_01EMPT0001"

LOG_500 = (
    "POST /api/checkout 500 Internal Server Error: payment-db connection pool exhausted (max 20)"
)
LOG_TIMEOUT = "POST /api/checkout 500 Internal Server Error: timeout after 5000ms"
UNBOUND_LOG = "worker heartbeat missed on node ip-10-0-3-17 during GC pause of 742ms"
"""A log line no claim binds to: it must never reach the Verifier or the Composer."""
RATE_SUMMARY = "http_5xx_rate baseline 0.2% peak 41.8% at 2026-11-30T14:07:00Z"
DEPLOY_TEXT = (
    "checkout-service v2.3.1 deployed at 2026-11-30T14:02:11Z: "
    "reduce payment-db connection pool size from 50 to 20"
)


# --- invocations ---------------------------------------------------------------------------


def invocation(
    tool_call_id: str,
    tool_name: str,
    *,
    status: LifecycleStatus = LifecycleStatus.READY,
    evidence_status: EvidenceStatus | None = EvidenceStatus.EVIDENCE_FOUND,
    service: str | None = "checkout-service",
    filter: str | None = None,
    projection: bool = True,
    **result: Any,
) -> ToolInvocation:
    """One invocation whose projection holds `result` beside the reserved keys."""
    scope = QueryScope(service=service, window=WINDOW, filter=filter)
    return ToolInvocation(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments={"service": service},
        status=status,
        evidence_status=evidence_status,
        projection=Projection(scope=scope, **result) if projection else None,
    )


def logs_invocation(**overrides: Any) -> ToolInvocation:
    """search_logs over checkout-service: 1432 errors, two hits and an unbound third."""
    fields: dict[str, Any] = {
        "filter": "level:error",
        "total": 1432,
        "hits": [
            {"ts": "2026-11-30T14:03:12Z", "message": LOG_500},
            {"ts": "2026-11-30T14:03:13Z", "message": LOG_TIMEOUT},
            {"ts": "2026-11-30T14:09:40Z", "message": UNBOUND_LOG},
        ],
    }
    fields.update(overrides)
    return invocation(LOGS_ID, "search_logs", **fields)


def metrics_invocation() -> ToolInvocation:
    """query_metrics: the 5xx rate series."""
    return invocation(
        METRICS_ID, "query_metrics", filter="http_5xx_rate",
        series=[{"name": "http_5xx_rate", "unit": "%", "baseline": 0.2, "peak": 41.8,
                 "summary": RATE_SUMMARY}],
    )


def deploys_invocation() -> ToolInvocation:
    """list_deployments: one deploy of v2.3.1."""
    return invocation(
        DEPLOYS_ID, "list_deployments",
        deployments=[{"version": "v2.3.1", "description": DEPLOY_TEXT}],
    )


def empty_invocation(**overrides: Any) -> ToolInvocation:
    """A successful search over inventory-service that found nothing: READY + NO_EVIDENCE."""
    fields: dict[str, Any] = {
        "evidence_status": EvidenceStatus.NO_EVIDENCE, "service": "inventory-service",
        "filter": "level:error", "hits": [],
    }
    fields.update(overrides)
    return invocation(EMPTY_ID, "search_logs", **fields)


def invocations() -> list[ToolInvocation]:
    """The standard run: logs, metrics, deployments and an empty search."""
    return [logs_invocation(), metrics_invocation(), deploys_invocation(), empty_invocation()]


# --- Executor output -----------------------------------------------------------------------


def binding(
    invocation_id: str = LOGS_ID,
    tool_name: str = "search_logs",
    path: str = "$.hits[0].message",
    matched_text: str = "payment-db connection pool exhausted",
) -> dict[str, str]:
    """One evidence binding as the Executor writes it."""
    return {"invocation_id": invocation_id, "tool_name": tool_name, "path": path,
            "matched_text": matched_text}


def claim(
    claim_id: str,
    text: str,
    *bindings: Mapping[str, str],
    kind: ClaimKind | str = ClaimKind.FINDING,
    critical: bool = True,
    status: ClaimStatus | str = ClaimStatus.CONFIRMED,
) -> dict[str, Any]:
    """One claim as the Executor writes it."""
    return {"claim_id": claim_id, "text": text, "kind": str(kind), "critical": critical,
            "status": str(status), "evidence_bindings": [dict(b) for b in bindings]}


def executor_output(
    *claims: Mapping[str, Any],
    hypotheses: Iterable[Mapping[str, Any]] = (),
    missing_info: Iterable[str] = (),
    recommended_actions: Iterable[Mapping[str, Any]] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A whole Executor document; `extra` adds top-level keys (e.g. removed fields)."""
    return {"claims": [dict(c) for c in claims], "hypotheses": [dict(h) for h in hypotheses],
            "missing_info": list(missing_info),
            "recommended_actions": [dict(a) for a in recommended_actions], **extra}


ERRORS_TEXT = "checkout-service logged 1432 errors, returning HTTP 500"
RATE_TEXT = "The http_5xx_rate of checkout-service rose from a 0.2% baseline to 41.8% at 14:07"
DEPLOY_CLAIM_TEXT = (
    "checkout-service v2.3.1 was deployed at 14:02, reducing the payment-db connection pool "
    "from 50 to 20"
)
ROOT_TEXT = (
    "Deploy v2.3.1 cut the payment-db connection pool to 20, and the exhausted pool caused the "
    "HTTP 500 errors"
)


def errors_claim(claim_id: str = "c1", **kw: Any) -> dict[str, Any]:
    """FINDING, fully supported by the logs (two bindings)."""
    return claim(
        claim_id, ERRORS_TEXT,
        binding(path="$.total", matched_text="1432"),
        binding(matched_text="POST /api/checkout 500 Internal Server Error"),
        **kw,
    )


def rate_claim(claim_id: str = "c2", **kw: Any) -> dict[str, Any]:
    """FINDING, fully supported by the metrics summary (bracket-form path)."""
    return claim(
        claim_id, RATE_TEXT,
        binding(METRICS_ID, "query_metrics", "$['series'][0]['summary']", RATE_SUMMARY), **kw,
    )


def deploy_claim(claim_id: str = "c3", **kw: Any) -> dict[str, Any]:
    """FINDING, fully supported by the deployment record."""
    return claim(
        claim_id, DEPLOY_CLAIM_TEXT,
        binding(DEPLOYS_ID, "list_deployments", "$.deployments[0].description", DEPLOY_TEXT),
        **kw,
    )


def root_claim(claim_id: str = "c4", **kw: Any) -> dict[str, Any]:
    """ROOT_CAUSE whose facts are all in its evidence: a reasonable inference."""
    return claim(
        claim_id, ROOT_TEXT,
        binding(DEPLOYS_ID, "list_deployments", "$.deployments[0].description", DEPLOY_TEXT),
        binding(matched_text="500 Internal Server Error: payment-db connection pool exhausted"),
        kind=ClaimKind.ROOT_CAUSE, **kw,
    )


def good_output(**kw: Any) -> dict[str, Any]:
    """The four standard claims, a hypothesis, a gap and an action: verifies to PASS."""
    defaults: dict[str, Any] = {
        "hypotheses": [{"text": "Traffic at 14:07 exceeded what a pool of 20 connections can "
                                "serve", "claim_ids": ["c2", "c4"]}],
        "missing_info": ["Connection pool utilization for payment-db was not queried."],
        "recommended_actions": [{"text": "Restore the payment-db connection pool size to 50",
                                 "claim_ids": ["c3", "c4"]}],
    }
    defaults.update(kw)
    return executor_output(errors_claim(), rate_claim(), deploy_claim(), root_claim(), **defaults)


# --- bundles and runs ----------------------------------------------------------------------


def bundle(
    output: Mapping[str, Any] | str,
    *,
    tools: Sequence[ToolInvocation] | None = None,
    query: str = QUERY,
    retry_context: RetryContext | None = None,
) -> RunBundle:
    """A run bundle; a dict output is serialized as the Executor's raw JSON."""
    raw = output if isinstance(output, str) else json.dumps(output)
    return RunBundle(
        query=query, intent=Intent.DIAGNOSIS,
        invocations=list(invocations() if tools is None else tools),
        executor_output_raw=raw, retry_context=retry_context,
    )


def run(
    output: Mapping[str, Any] | str | RunBundle,
    *,
    verifier: Model | None = None,
    composer: Model | None = None,
    tools: Sequence[ToolInvocation] | None = None,
) -> VerifiedRun:
    """verify_bundle with the offline agents unless doubles are given."""
    the_bundle = output if isinstance(output, RunBundle) else bundle(output, tools=tools)
    return verify_bundle(
        the_bundle,
        verifier=verifier or OfflineVerifier(),
        composer=composer or TemplateComposer(),
        run_id="run-test",
    )


def scripted(*replies: str | Exception) -> Scripted:
    """A Scripted with these replies queued (none: any call fails the test loudly)."""
    return Scripted().enqueue(*replies)


def answer_text(result: VerifiedRun) -> str:
    """Everything the user is shown: summary, actions and answer."""
    answer = result.result.final_answer
    return "\n".join([answer.answer_summary, *answer.recommended_actions,
                      answer.user_facing_answer])


# --- model replies -------------------------------------------------------------------------


def verifier_reply(
    verdict: Verdict | str,
    checks: Mapping[str, Verification | str] | Sequence[Mapping[str, Any]],
    *,
    groundedness: float = 0.9,
    rationale: str = "Checked each claim against its verified evidence.",
    gaps: Iterable[Mapping[str, Any]] = (),
    **extra: Any,
) -> str:
    """A Verifier answer as JSON; `checks` maps claim id to verification, or lists raw checks."""
    if isinstance(checks, Mapping):
        check_list = [{"claim_id": cid, "verification": str(v), "evidence_refs": []}
                      for cid, v in checks.items()]
    else:
        check_list = [dict(c) for c in checks]
    return json.dumps({"verdict": str(verdict), "groundedness_score": groundedness,
                       "rationale": rationale, "claim_checks": check_list,
                       "evidence_gaps": [dict(g) for g in gaps], **extra})


def composer_reply(
    summary: str = "checkout-service logged 1432 errors, returning HTTP 500.",
    *,
    actions: Sequence[str] = (),
    answer: str | None = None,
    cites: Sequence[str] = ("c1",),
    action_cites: Sequence[str] = ("A1",),
) -> str:
    """A Composer reply as JSON: cited statements (each text citing `cites`; actions citing
    `action_cites`)."""
    def statement(text: str, ids: Sequence[str]) -> dict[str, Any]:
        return {"text": text, "cites": list(ids)}

    return json.dumps({
        "answer_summary": [statement(summary, cites)],
        "user_facing_answer": [statement(answer or summary, cites)],
        "recommended_actions": [statement(a, action_cites) for a in actions]})


def assert_published(answer: Any, reply: str) -> None:
    """`answer` (a FinalAnswer or ComposerOutput) is what `reply` publishes: its summary
    statements as the summary, its body statements as items of the answer, its actions."""
    data = json.loads(reply)
    summary = " ".join(s["text"] for s in data["answer_summary"])
    assert answer.answer_summary.endswith(summary)
    for statement in data["user_facing_answer"]:
        assert f"\n- {statement['text']}" in answer.user_facing_answer
    actions = [a["text"] for a in data["recommended_actions"]]
    assert answer.recommended_actions == (
        actions or ["Collect the missing evidence listed above, then ask again."])


# --- contract values for the pure builders -------------------------------------------------


def verified_claim(
    claim_id: str,
    text: str,
    *,
    kind: ClaimKind = ClaimKind.FINDING,
    critical: bool = True,
    status: ClaimStatus = ClaimStatus.CONFIRMED,
) -> VerifiedClaim:
    """A claim of the verified projection."""
    return VerifiedClaim(claim_id=claim_id, text=text, kind=kind, critical=critical,
                         status=status)


def check(claim_id: str, verification: Verification, *refs: str) -> ClaimCheck:
    """A claim check."""
    return ClaimCheck(claim_id=claim_id, verification=verification, evidence_refs=list(refs))


def evidence(
    claim_id: str,
    matched_text: str,
    *,
    evidence_id: str = "E1",
    invocation_id: str = LOGS_ID,
    tool_name: str = "search_logs",
    path: str = "$.hits[0].message",
    service: str | None = "checkout-service",
    evidence_status: EvidenceStatus = EvidenceStatus.EVIDENCE_FOUND,
) -> VerifiedEvidence:
    """One verified evidence item."""
    return VerifiedEvidence(
        evidence_id=evidence_id, claim_id=claim_id, invocation_id=invocation_id,
        tool_name=tool_name, path=path, matched_text=matched_text,
        evidence_status=evidence_status, scope=QueryScope(service=service, window=WINDOW),
    )


def gap(claim_id: str | None, *, critical: bool = True, tool: str | None = None) -> EvidenceGap:
    """An evidence gap."""
    return EvidenceGap(claim_id=claim_id, description=f"More evidence needed for {claim_id}.",
                       critical=critical, suggested_tool=tool)


def composer_input(
    verdict: Verdict = Verdict.PASS,
    *,
    claims: Iterable[AllowedClaim] = (),
    hypotheses: Iterable[str] = (),
    missing_info: Iterable[str] = (),
    actions: Iterable[str] = (),
    query: str = QUERY,
    rationale: str = "Checked.",
) -> ComposerInput:
    """A ComposerInput built directly."""
    return ComposerInput(
        original_query=query, verdict=verdict, allowed_claims=list(claims),
        allowed_hypotheses=[AllowedHypothesis(text=t) for t in hypotheses],
        missing_info=list(missing_info),
        recommended_actions=[ComposerAction(text=t) for t in actions], rationale=rationale,
    )


def allowed(
    claim_id: str,
    text: str,
    *,
    kind: ClaimKind = ClaimKind.FINDING,
    verification: Verification = Verification.DIRECT_OBSERVATION,
) -> AllowedClaim:
    """An allowed claim."""
    return AllowedClaim(claim_id=claim_id, text=text, kind=kind, critical=True,
                        verification=verification)
