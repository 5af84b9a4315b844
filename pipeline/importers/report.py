"""The check report of an imported answer: the verified run's judgements laid over the answer
as it was written, claim by claim (`models.check.CheckReport`)."""

from __future__ import annotations

import json
from typing import Any

from models.bundle import ImportedClaim, RunBundle, RunResult
from models.check import CheckedClaim, CheckReport, ClaimBinding
from models.verifier import ClaimCheck, Verification
from pipeline.rules.actions import recommendation_problem, retrieved_steps
from pipeline.rules.facts import FactSet, extract_facts
from pipeline.rules.guards import STATED
from pipeline.rules.prose import plain_text

NOT_FOUND = "no tool output carries its facts: not verifiable"
NOT_JUDGED = "not judged: the run ended before the Verifier"
ACTION_FOLLOWS = ("a next step that follows from the claims kept and the runbook steps "
                  "retrieved: it names nothing they do not")


def check_report(bundle: RunBundle, result: RunResult) -> CheckReport:
    """The report of a bundle made by `to_bundle` and the result of verifying it."""
    if bundle.imported is None:
        raise ValueError("the bundle is not an imported run")
    evaluation = result.self_evaluation.verifier_evaluation
    checks = {c.claim_id: c for c in evaluation.claim_checks}
    downgrades = _downgrades(evaluation.downgrades)
    bindings = _bindings(bundle.executor_output_raw)
    claims = [_checked(c, checks.get(c.claim_id), downgrades.get(c.claim_id),
                       bindings.get(c.claim_id, [])) for c in bundle.imported.claims]
    steps = retrieved_steps(bundle.invocations)
    claims = [_action_check(c, claims, steps) if c.action else c for c in claims]
    return CheckReport(
        run_id=result.run_id, question=bundle.query, format=bundle.imported.format,
        agent=bundle.imported.agent, verdict=result.verdict, status=result.status,
        fallback_type=result.fallback_type, answer=bundle.imported.answer,
        summary=result.final_answer.answer_summary, claims=claims,
        trace_id=bundle.imported.trace_id, span_id=bundle.imported.span_id,
        response_id=bundle.imported.response_id)


def _action_check(claim: CheckedClaim, claims: list[CheckedClaim], steps: list[str]
                  ) -> CheckedClaim:
    """A recommendation of the answer, judged against the claims of it that were kept and the
    runbook steps the run retrieved (`actions.recommendation_problem`): following from them, a
    reasonable inference (a next step is never an observation); otherwise unsupported."""
    material = [text for c in claims if c.verification in STATED
                for text in (c.text, *(b.matched_text for b in c.bindings))]
    problem = recommendation_problem(plain_text(claim.text), material=material, steps=steps)
    if problem is None:
        return claim.model_copy(update={"verification": Verification.REASONABLE_INFERENCE,
                                        "note": ACTION_FOLLOWS})
    return claim.model_copy(update={"verification": Verification.UNSUPPORTED,
                                    "note": f"a next step that does not follow: it {problem}"})


def _checked(claim: ImportedClaim, check: ClaimCheck | None, downgrade: str | None,
             bindings: list[ClaimBinding]) -> CheckedClaim:
    verification: Verification | None
    if claim.action:  # judged once every claim is (`_action_check`)
        verification, note = None, None
    elif not claim.bound:
        verification, note = Verification.UNSUPPORTED, NOT_FOUND
    elif check is None:
        verification, note = None, NOT_JUDGED
    else:
        verification, note = check.verification, downgrade or check.note
        if verification is Verification.CONTRADICTED and downgrade is None:
            note = _differing(claim.text, bindings) or note
    return CheckedClaim(claim_id=claim.claim_id, text=claim.text, span=(claim.start, claim.end),
                        kind=claim.kind, critical=claim.critical, hedged=claim.hedged,
                        action=claim.action, verification=verification, note=note,
                        bindings=bindings)


def _differing(text: str, bindings: list[ClaimBinding]) -> str | None:
    """Which values of a contradicted claim differ from every value of their kind in what it
    was bound to ("14:10 (timestamp) differs from its evidence"), or None."""
    known = FactSet.from_texts([b.matched_text for b in bindings])
    found = [f for f in extract_facts(plain_text(text), single_digits=True) if known.conflicts(f)]
    if not found:
        return None
    listed = ", ".join(f"{f.text} ({f.sort})" for f in found[:4])
    return f"differs from every value of its kind in its evidence: {listed}"


def _downgrades(lines: list[str]) -> dict[str, str]:
    """The post-check's last word on each claim ("c3: direct_observation -> contradicted
    (...)"), by claim id."""
    found: dict[str, str] = {}
    for line in lines:
        claim_id, sep, rest = line.partition(": ")
        if sep:
            found[claim_id] = rest
    return found


def _bindings(raw: str) -> dict[str, list[ClaimBinding]]:
    document: dict[str, Any] = json.loads(raw)
    return {claim["claim_id"]: [ClaimBinding(tool_call_id=b["invocation_id"],
                                             tool_name=b["tool_name"], path=b["path"],
                                             matched_text=b["matched_text"])
                                for b in claim.get("evidence_bindings", [])]
            for claim in document.get("claims", [])}
