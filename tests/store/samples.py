"""Sample rows the store suites write: a tool invocation, a run's result and self-evaluation,
a model attempt, a run bundle."""

from __future__ import annotations

from datetime import UTC, datetime

from models.bundle import FinalAnswer, RunBundle, RunResult
from models.common import FallbackType, Intent, Verdict
from models.composer import ComposerOutput
from models.evaluation import (
    TRACEABILITY_VERSION,
    PromptAudit,
    PromptRef,
    SelfEvaluation,
    StageStatus,
    VerifierEvaluation,
    VerifierStatus,
)
from models.executor import ClaimKind, ClaimStatus
from models.gatekeeper import (
    CheckedBinding,
    GatekeeperResult,
    RuleId,
    RuleOutcome,
    Severity,
    VerifiedClaim,
    VerifiedEvidence,
    VerifiedExecutorOutput,
)
from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    Projection,
    QueryScope,
    TimeWindow,
    ToolInvocation,
)
from models.run import LlmAttempt
from models.verifier import ClaimCheck, EvidenceGap, FactCheck, FactClass, Verification

QUERY = "why is checkout-service returning 500s?"
SCOPE = QueryScope(
    service="checkout-service",
    window=TimeWindow(start="2026-11-30T10:00:00Z", end="2026-11-30T11:00:00Z"),
    filter="level:error",
)

def make_projection(**items: object) -> Projection:
    return Projection(scope=SCOPE, truncated=False, total_items=1, **items)

def make_invocation(
    tool_call_id: str,
    *,
    tool_name: str = "search_logs",
    status: LifecycleStatus = LifecycleStatus.READY,
) -> ToolInvocation:
    ready = status is LifecycleStatus.READY
    return ToolInvocation(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        arguments={"service": "checkout-service", "query": "level:error", "limit": 20},
        status=status,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND if ready else None,
        projection=(make_projection(hits=[{"message": "HTTP 500 upstream timeout"}])
                    if ready else None),
    )

def make_self_evaluation(verdict: Verdict = Verdict.PASS) -> SelfEvaluation:
    claim = VerifiedClaim(
        claim_id="c1",
        text="checkout-service returned HTTP 500 after upstream timeouts",
        kind=ClaimKind.FINDING,
        critical=True,
        status=ClaimStatus.CONFIRMED,
    )
    evidence = VerifiedEvidence(
        evidence_id="E1",
        claim_id="c1",
        invocation_id="toolu_01",
        tool_name="search_logs",
        path="$.hits[0].message",
        matched_text="HTTP 500 upstream timeout",
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        scope=SCOPE,
    )
    gatekeeper = GatekeeperResult(
        status="pass",
        severity=Severity.PASS,
        rules=[RuleOutcome(rule=rule, status="pass", failures=0) for rule in RuleId],
        failed_rules=[],
        checked_bindings=[
            CheckedBinding(
                claim_id="c1",
                index=0,
                invocation_id="toolu_01",
                tool_name="search_logs",
                path="$.hits[0].message",
                status="pass",
            )
        ],
        warnings=["projection truncated for toolu_02"],
    )
    evaluation = VerifierEvaluation(
        executor_status=StageStatus.OK,
        verifier_status=VerifierStatus.COMPLETED,
        model_verdict=verdict,
        effective_verdict=verdict,
        verdict=verdict,
        verdict_ceiling=Verdict.PASS,
        groundedness_score=0.875,
        rationale="Every critical claim is a direct observation.",
        claim_checks=[
            ClaimCheck(
                claim_id="c1",
                verification=Verification.DIRECT_OBSERVATION,
                evidence_refs=["E1", "toolu_01"],
                note="exact match",
            )
        ],
        facts_checked=[FactCheck(claim_id="c1", classification=FactClass.DIRECT_EVIDENCE)],
        evidence_gaps=[
            EvidenceGap(description="no deploy history", critical=False, suggested_tool="deploys")
        ],
        executor_structured_output=VerifiedExecutorOutput(claims=[claim]),
        verified_evidence=[evidence],
        gatekeeper_result=gatekeeper,
        composer_status=StageStatus.OK,
        composer_output=ComposerOutput(
            answer_summary="Upstream timeouts cause the 500s.",
            recommended_actions=["Check the payment gateway latency."],
            user_facing_answer="checkout-service returns HTTP 500 after upstream timeouts.",
        ),
        prompt_audit=PromptAudit(
            version="2026-11",
            prompts=[
                PromptRef(role=role, name=f"{role}.main", version="3", sha256="ab" * 32)
                for role in ("planner", "executor", "verifier", "composer")
            ],
        ),
        traceability_version=TRACEABILITY_VERSION,
        evidence_retry_count=0,
    )
    return SelfEvaluation(
        rule_evaluation={"severity": "pass", "failed_rules": []},
        aiops_rule_evaluation={"invocations": 2, "ready": 2, "no_evidence": 0},
        verifier_evaluation=evaluation,
    )

def make_result(run_id: str, *, fallback: bool = False) -> RunResult:
    answer = FinalAnswer(
        answer_summary="Upstream timeouts cause the 500s.",
        recommended_actions=["Check the payment gateway latency."],
        user_facing_answer="checkout-service returns HTTP 500 after upstream timeouts.",
    )
    return RunResult(
        run_id=run_id,
        status="FALLBACK" if fallback else "SUCCESS",
        verdict=Verdict.REJECT if fallback else Verdict.PASS,
        fallback_type=FallbackType.SEMANTIC_UNSUPPORTED if fallback else None,
        final_answer=answer,
        self_evaluation=make_self_evaluation(Verdict.REJECT if fallback else Verdict.PASS),
    )

def make_attempt(run_id: str, role: str = "verifier", number: int = 1,
                 **fields: object) -> LlmAttempt:
    values: dict[str, object] = {
        "run_id": run_id,
        "role": role,
        "cycle": 1,
        "attempt_number": number,
        "prompt_name": f"{role}.main",
        "prompt_version": "3",
        "input_sha256": "0123456789abcdef" * 4,
        "model": "claude-sonnet-4-5",
        "latency_ms": 1234.5,
        "input_tokens": 1500,
        "output_tokens": 321,
        "cache_read_tokens": 1024,
        "cache_write_tokens": 64,
        "cost_usd": 0.012345,
        "outcome": "ok",
        "error_type": None,
        "created_at": datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC),
    }
    values.update(fields)
    return LlmAttempt.model_validate(values)

def make_bundle(run_id: str | None = "source-run") -> RunBundle:
    return RunBundle(
        run_id=run_id,
        session_id="session-1",
        query=QUERY,
        intent=Intent.DIAGNOSIS,
        invocations=[make_invocation("toolu_01"),
                     make_invocation("toolu_02", tool_name="query_metrics")],
        executor_output_raw='{"claims": [{"claim_id": "c1"}]}\n',
    )
