"""Building the Verifier's verified-only input from the Gatekeeper outcome."""

from __future__ import annotations

from models.common import Intent
from models.gatekeeper import GatekeeperOutcome, VerifiedEvidence
from models.verifier import DiagnosisContext, GatekeeperAudit, RetryContext, VerifierInput
from pipeline.untrusted import instruction_like


def build_verifier_input(
    outcome: GatekeeperOutcome,
    *,
    query: str,
    intent: Intent = Intent.DIAGNOSIS,
    retry_context: RetryContext | None = None,
) -> VerifierInput:
    """The five spec blocks (six after an evidence retry); nothing else reaches the Verifier."""
    ceiling = outcome.result.severity.ceiling
    if ceiling is None:
        raise ValueError("a rejected Gatekeeper outcome never reaches the Verifier")
    result = outcome.result
    return VerifierInput(
        diagnosis_context=DiagnosisContext(query=query, intent=intent),
        verified_executor_output=outcome.verified_output,
        verified_evidence=mark_untrusted(outcome.verified_evidence),
        gatekeeper_audit=GatekeeperAudit(
            status=result.status,
            severity=result.severity,
            failed_rules=result.failed_rules,
            checked_bindings=len(result.checked_bindings),
            passed_bindings=sum(1 for b in result.checked_bindings if b.status == "pass"),
            warnings=result.warnings,
        ),
        verdict_ceiling=ceiling,
        retry_context=retry_context,
    )



def mark_untrusted(evidence: list[VerifiedEvidence]) -> list[VerifiedEvidence]:
    """The evidence with each excerpt that reads as instructions to an agent marked as
    untrusted quoted data (`VerifiedEvidence.untrusted`: why)."""
    marked = []
    for item in evidence:
        reason = item.untrusted or instruction_like(item.matched_text)
        marked.append(item if reason == item.untrusted
                      else item.model_copy(update={"untrusted": reason}))
    return marked
