"""Building the Composer's input: verified claims filtered through the Verifier's claim checks."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from models.common import Verdict
from models.composer import (
    AllowedClaim,
    AllowedHypothesis,
    ComposerAction,
    ComposerInput,
    GapItem,
    RunbookStep,
    WithheldAction,
)
from models.executor import CONCLUSIONS, ClaimKind, ClaimStatus, ExecutorEvidenceV2
from models.gatekeeper import VerifiedClaim
from models.verifier import ClaimCheck, EvidenceGap, Verification
from pipeline.rules import lexicon
from pipeline.rules.actions import Action, screen_actions
from pipeline.rules.facts import FactSet
from pipeline.rules.guards import STATED, unsupported_facts
from pipeline.rules.statements import check_reply, gap_problem, grounding_problem, self_statements
from pipeline.rules.text import normalize
from pipeline.rules.untrusted import instruction_like

RATIONALE_WITHHELD = "The Verifier's rationale referred to withheld claims and is not shown."


@dataclass(frozen=True, slots=True)
class Composition:
    """The Composer's input and the Executor actions the action guard kept from it."""

    composer_input: ComposerInput
    withheld_actions: list[WithheldAction]


def build_composition(
    *,
    query: str,
    verdict: Verdict,
    claims: Sequence[VerifiedClaim],
    checks: Sequence[ClaimCheck],
    gaps: Sequence[EvidenceGap],
    executor_output: ExecutorEvidenceV2,
    rationale: str,
    runbook_steps: Sequence[RunbookStep] = (),
    evidence: Sequence[str] = (),
    unsaid: Collection[str] = (),
) -> Composition:
    """Only what the checks allow. REJECT keeps no hypotheses and no conclusions. No text that
    reads as instructions to an agent passes, whatever its checks; actions pass the action
    guard (`pipeline.rules.actions`) against the allowed material and the steps of the runbooks the
    allowed claims cite. Evidence gaps pass the gap check (`statements.gap_problem`) against
    the query, the allowed material and `evidence` (the run's verified evidence texts and tool
    names), or are shown as a fixed line that says only that something is missing. A claim in
    `unsaid` (worded beyond every output of its tool calls, `guards.unsaid_words`) is neither
    shown nor a hypothesis, whatever its check: its words are not those of what it cites; a
    conclusion withheld so is named as a gap in a fixed line. Every item
    left can be published as it stands (`statements.self_statements`): a claim, hypothesis or
    action whose own wording the statement check refuses under this verdict (a causal
    observation under REJECT, say) is withheld, with the actions that rest on it."""
    verification = {c.claim_id: c.verification for c in checks}
    allowed: list[AllowedClaim] = []
    hypotheses: list[AllowedHypothesis] = []
    withheld: list[str] = []
    beyond = False
    for claim in claims:
        kind = verification.get(claim.claim_id, Verification.UNSUPPORTED)
        if instruction_like(claim.text):
            withheld.append(claim.text)
        elif _is_allowed(claim, kind, verdict) and claim.claim_id not in unsaid:
            allowed.append(AllowedClaim(
                claim_id=claim.claim_id, text=claim.text, kind=claim.kind,
                critical=claim.critical, verification=kind,
            ))
        elif (verdict is not Verdict.REJECT and kind in (*STATED, Verification.OVERSTATED)
              and claim.claim_id not in unsaid
              and not (kind is Verification.OVERSTATED
                       and claim.kind is ClaimKind.NEGATIVE_OBSERVATION)):
            # an overstated negative observation says more than its query looked at: it is no
            # possible direction, and its wider words are not shown
            hypotheses.append(AllowedHypothesis(text=claim.text, claim_ids=[claim.claim_id]))
        else:
            withheld.append(claim.text)
            if claim.claim_id in unsaid and claim.kind in CONCLUSIONS:
                beyond = True
    # claims that failed the Gatekeeper are withheld too: Executor text repeating them is not
    # screened by any check and must not reach the Composer through gaps, hypotheses or actions
    verified = {c.claim_id for c in claims}
    withheld += [c.text for c in executor_output.claims if c.claim_id not in verified]
    usable = {c.claim_id for c in allowed} | {i for h in hypotheses for i in h.claim_ids}
    leak = _LeakFilter(withheld, kept=[query, *(c.text for c in allowed),
                                        *(h.text for h in hypotheses)])
    if verdict is not Verdict.REJECT:
        hypotheses += _executor_hypotheses(executor_output, usable, claims, leak)
    allowed_ids = {c.claim_id for c in allowed}
    actions, refused = _cited_actions(executor_output, allowed_ids, leak)
    kept, guarded = screen_actions(
        actions, material_texts=[query, *(c.text for c in allowed), *(h.text for h in hypotheses)],
        steps=[s for s in runbook_steps if s.claim_id in allowed_ids],
    )
    kept, ungrounded = _grounded_actions(kept, allowed, runbook_steps)
    guarded += ungrounded
    claim_ids = {c.claim_id for c in allowed}
    material = [query, *(c.text for c in allowed), *(h.text for h in hypotheses),
                *(text for _, text, _ in kept), *evidence]
    gap_texts = _dedupe([_gap_text(g.description, material, leak, tool=g.suggested_tool,
                                   from_verifier=True) for g in gaps]
                        + [_gap_text(t, material, leak) for t in executor_output.missing_info
                           if t.strip()]
                        + ([BEYOND_GAP] if beyond else []))
    action_ids = citable_ids("A", len(kept), taken=claim_ids)
    return _publishable(ComposerInput(
        original_query=query,
        verdict=verdict,
        allowed_claims=allowed,
        allowed_hypotheses=[h.model_copy(update={"hypothesis_id": i}) for h, i in zip(
            hypotheses, citable_ids("H", len(hypotheses), taken=claim_ids), strict=True)],
        missing_info=[GapItem(gap_id=i, text=t) for t, i in zip(
            gap_texts, citable_ids("G", len(gap_texts), taken=claim_ids), strict=True)],
        recommended_actions=[ComposerAction(action_id=i, text=text, claim_ids=ids)
                             for (_, text, ids), i in zip(kept, action_ids, strict=True)],
        rationale=rationale if leak.clean(rationale) else RATIONALE_WITHHELD,
    ), [*refused, *guarded], {i: index for (index, _, _), i in zip(kept, action_ids,
                                                                   strict=True)})


VERIFIER_GAP = "More evidence was asked for than this run gathered"
BEYOND_GAP = ("A conclusion the investigation drew is not shown: no tool output it cites "
              "states it.")
EXECUTOR_GAP = ("The investigation reported missing information that is not shown: it did not "
                "pass the evidence-gap check")


def _gap_text(text: str, material: Sequence[str], leak: _LeakFilter, *, tool: str | None = None,
              from_verifier: bool = False) -> str:
    """`text` when it passes the gap check and repeats nothing withheld; else a fixed line
    (naming the suggested tool when the tool's name passes the same check)."""
    if leak.clean(text) and gap_problem(text, material) is None:
        return text
    if not from_verifier:
        return EXECUTOR_GAP + "."
    if tool and re.fullmatch(r"[a-z][a-z0-9_]{1,63}", tool) and gap_problem(
            f"{tool} was not run", material) is None:
        return f"{VERIFIER_GAP} (suggested tool: {tool})."
    return VERIFIER_GAP + "."


def _publishable(ci: ComposerInput, withheld: list[WithheldAction],
                 action_index: dict[str, int]) -> Composition:
    """The composition without the items whose own statement the check refuses: each refused
    claim, hypothesis or gap is dropped, each action resting on a dropped claim is withheld,
    until every item passes."""
    while True:
        refused = {c.statement.cites[0] for c in check_reply(self_statements(ci), ci)
                   if not c.accepted and c.statement.cites}
        if not refused:
            return Composition(ci, sorted(withheld, key=lambda w: w.index))
        claims = [c for c in ci.allowed_claims if c.claim_id not in refused]
        dropped = {c.claim_id for c in ci.allowed_claims} - {c.claim_id for c in claims}
        actions = []
        for action in ci.recommended_actions:
            if action.action_id in refused or set(action.claim_ids) & dropped:
                withheld.append(WithheldAction(
                    index=action_index[action.action_id], text=action.text,
                    reason="rests on material that cannot be published under this verdict"))
            else:
                actions.append(action)
        ci = ci.model_copy(update={
            "allowed_claims": claims,
            "allowed_hypotheses": [h for h in ci.allowed_hypotheses
                                   if h.hypothesis_id not in refused
                                   and not set(h.claim_ids) & dropped],
            "missing_info": [g for g in ci.missing_info if g.gap_id not in refused],
            "recommended_actions": actions,
        })


def citable_ids(prefix: str, count: int, *, taken: set[str]) -> list[str]:
    """`count` ids `H1`, `H2` ... for statements to cite; the prefix is doubled (`HH1`) until
    none is a claim id, so an id names one thing only."""
    while any(f"{prefix}{n}" in taken for n in range(1, count + 1)):
        prefix += prefix[0]
    return [f"{prefix}{n}" for n in range(1, count + 1)]


def _cited_actions(
    output: ExecutorEvidenceV2, allowed_ids: set[str], leak: _LeakFilter,
) -> tuple[list[Action], list[WithheldAction]]:
    """Actions citing allowed claims only and repeating nothing withheld; the rest, withheld."""
    cited: list[Action] = []
    refused: list[WithheldAction] = []
    for index, action in enumerate(output.recommended_actions):
        if not set(action.claim_ids) <= allowed_ids:
            # counted, not named: the ids are the Executor's own strings, unchecked
            missing = len(set(action.claim_ids) - allowed_ids)
            refused.append(WithheldAction(
                index=index, text=action.text,
                reason=f"cites {missing} claim{'s' if missing != 1 else ''} that "
                       f"{'are' if missing != 1 else 'is'} not allowed"))
        elif not leak.clean(action.text):
            refused.append(WithheldAction(
                index=index, text=action.text, reason="repeats a withheld claim or text that "
                "reads as instructions to an agent"))
        else:
            cited.append((index, action.text, list(action.claim_ids)))
    return cited, refused


def _grounded_actions(kept: list[Action], allowed: Sequence[AllowedClaim],
                      steps: Sequence[RunbookStep]) -> tuple[list[Action], list[WithheldAction]]:
    """Actions whose every fact and word is in the claims they cite, the runbook steps of those
    claims, or the words of operating a service (`lexicon.ACTION_WORDS`); the rest, withheld
    (the reason counts what it adds rather than repeating it)."""
    texts = {c.claim_id: c.text for c in allowed}
    grounded: list[Action] = []
    withheld: list[WithheldAction] = []
    for index, text, ids in kept:
        material = [*(texts[i] for i in ids if i in texts),
                    *(s.text for s in steps if s.claim_id in ids)]
        if grounding_problem(text, material, vocabulary=lexicon.ACTION_WORDS,
                             action=True) is None:
            grounded.append((index, text, ids))
        else:
            withheld.append(WithheldAction(
                index=index, text=text,
                reason="says what the claims it cites and their runbook steps do not"))
    return grounded, withheld


def _is_allowed(claim: VerifiedClaim, kind: Verification, verdict: Verdict) -> bool:
    if kind not in STATED or claim.status is ClaimStatus.HYPOTHESIS:
        return False
    if verdict is Verdict.REJECT:
        return kind is Verification.DIRECT_OBSERVATION and claim.kind not in CONCLUSIONS
    return True


def _executor_hypotheses(
    output: ExecutorEvidenceV2,
    usable: set[str],
    claims: Sequence[VerifiedClaim],
    leak: _LeakFilter,
) -> list[AllowedHypothesis]:
    """Executor hypotheses resting only on usable claims and stating no fact beyond them."""
    texts = {c.claim_id: c.text for c in claims}
    kept: list[AllowedHypothesis] = []
    for hypothesis in output.hypotheses:
        ids = hypothesis.claim_ids
        if not ids or not set(ids) <= usable or not leak.clean(hypothesis.text):
            continue
        if unsupported_facts(hypothesis.text, FactSet.from_texts(texts[i] for i in ids)):
            continue
        if grounding_problem(hypothesis.text, [texts[i] for i in ids],
                             vocabulary=lexicon.HYPOTHESIS_WORDS) is not None:
            continue  # a word the claims it rests on never use: a new cause, entity or claim
        kept.append(AllowedHypothesis(text=hypothesis.text, claim_ids=list(ids)))
    return kept


class _LeakFilter:
    """Rejects text that repeats a withheld claim, states a fact only withheld claims state, or
    reads as instructions to an agent."""

    def __init__(self, withheld: Sequence[str], *, kept: Sequence[str]) -> None:
        self._withheld_texts = [normalize(t) for t in withheld if normalize(t)]
        self._withheld = FactSet.from_texts(withheld)
        self._kept = FactSet.from_texts(kept)

    def clean(self, text: str) -> bool:
        if instruction_like(text):
            return False
        normalized = normalize(text)
        if any(w in normalized or normalized in w for w in self._withheld_texts if normalized):
            return False
        return not any(
            self._withheld.supports(f) for f in unsupported_facts(text, self._kept)
        )

    def keep(self, texts: Sequence[str]) -> list[str]:
        return [t for t in texts if t.strip() and self.clean(t)]


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
