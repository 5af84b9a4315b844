"""Building the Verifier's verified-only input from the Gatekeeper outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models.common import Intent
from models.gatekeeper import GatekeeperOutcome, VerifiedEvidence
from models.invocation import ToolInvocation
from models.verifier import DiagnosisContext, GatekeeperAudit, RetryContext, VerifierInput
from pipeline.rules.jsonpath import PathError, resolve
from pipeline.rules.text import value_text
from pipeline.rules.untrusted import instruction_like


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



def mark_untrusted(
    evidence: Sequence[VerifiedEvidence], invocations: Sequence[ToolInvocation] = ()
) -> list[VerifiedEvidence]:
    """The evidence with each item marked untrusted quoted data (`VerifiedEvidence.untrusted`:
    why) when its matched text, or the whole value at its path in `invocations` (an excerpt
    may quote the harmless half of an attacker's line), reads as instructions to an agent."""
    by_id = {i.tool_call_id: i for i in invocations}
    documents: dict[str, Any] = {}
    marked = []
    for item in evidence:
        reason = item.untrusted or instruction_like(item.matched_text)
        invocation = by_id.get(item.invocation_id)
        if reason is None and invocation is not None and invocation.projection is not None:
            if item.invocation_id not in documents:
                documents[item.invocation_id] = invocation.projection.model_dump(mode="json")
            try:
                reason = instruction_like(value_text(resolve(documents[item.invocation_id],
                                                             item.path)))
            except PathError:
                reason = None
        marked.append(item if reason == item.untrusted
                      else item.model_copy(update={"untrusted": reason}))
    return marked
