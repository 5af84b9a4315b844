"""Deterministic answer text from Composer input, worded by verdict as composer.md requires.

Used by the offline template Composer and by the fallbacks, so every deterministic answer reads
the same way. It adds no fact: every service, number or id in its output comes from its input.
"""

from __future__ import annotations

from models.common import Verdict
from models.composer import ComposerInput, ComposerOutput
from models.executor import ClaimKind
from models.verifier import Verification

NO_RELIABLE_CONCLUSION = "Current evidence cannot support a reliable conclusion."
DEFAULT_ACTION = "Collect the missing evidence listed above, then ask again."


def render(composer_input: ComposerInput) -> ComposerOutput:
    """The verdict-specific answer for this input."""
    verdict = composer_input.verdict
    if verdict is Verdict.PASS:
        summary, sections = _pass(composer_input)
    elif verdict is Verdict.LOW_CONFID:
        summary, sections = _low_confid(composer_input)
    else:
        summary, sections = _reject(composer_input)
    actions = [a.text for a in composer_input.recommended_actions] or [DEFAULT_ACTION]
    body = [f"Question: {composer_input.original_query}", summary, *sections]
    return ComposerOutput(
        answer_summary=summary,
        recommended_actions=actions,
        user_facing_answer="\n\n".join(part for part in body if part),
    )


def _pass(ci: ComposerInput) -> tuple[str, list[str]]:
    root = [c for c in ci.allowed_claims if c.kind is ClaimKind.ROOT_CAUSE]
    direct = [c.text for c in ci.allowed_claims
              if c.kind is not ClaimKind.ROOT_CAUSE
              and c.verification is Verification.DIRECT_OBSERVATION]
    inferred = [c.text for c in ci.allowed_claims
                if c.kind is not ClaimKind.ROOT_CAUSE
                and c.verification is Verification.REASONABLE_INFERENCE]
    if root:
        summary = f"Root cause: {root[0].text}"
    else:
        summary = "Confirmed findings are listed below; no root cause is confirmed."
    return summary, [
        _section("Root cause, supported by verified evidence", [c.text for c in root]),
        _section("Confirmed findings", direct),
        _section("Inferred from the evidence", inferred),
        _section("Possible directions (not confirmed)", [h.text for h in ci.allowed_hypotheses]),
        _section("Evidence gaps", ci.missing_info),
    ]


def _low_confid(ci: ComposerInput) -> tuple[str, list[str]]:
    confirmed = [c.text for c in ci.allowed_claims
                 if c.verification is Verification.DIRECT_OBSERVATION
                 and c.kind is not ClaimKind.ROOT_CAUSE]
    directions = [c.text for c in ci.allowed_claims if c.text not in confirmed]
    directions += [h.text for h in ci.allowed_hypotheses]
    summary = "The evidence is incomplete, so no root cause is confirmed."
    return summary, [
        _section("Confirmed information", confirmed or ["Nothing could be confirmed."]),
        _section("Possible directions (not confirmed)", directions),
        _section("Evidence gaps", ci.missing_info or ["The evidence gaps were not itemized."]),
    ]


def _reject(ci: ComposerInput) -> tuple[str, list[str]]:
    observed = [c.text for c in ci.allowed_claims]
    return NO_RELIABLE_CONCLUSION, [
        _section("Verified observations (no conclusion is drawn from them)", observed),
        _section("Evidence gaps", ci.missing_info),
    ]


def _section(title: str, items: list[str]) -> str:
    if not items:
        return ""
    return title + ":\n" + "\n".join(f"- {item}" for item in items)
