"""Building the Composer's input: verified claims filtered through the Verifier's claim checks."""

from __future__ import annotations

from collections.abc import Sequence

from models.common import Verdict
from models.composer import AllowedClaim, AllowedHypothesis, ComposerAction, ComposerInput
from models.executor import ClaimKind, ClaimStatus, ExecutorEvidenceV2
from models.gatekeeper import VerifiedClaim
from models.verifier import ClaimCheck, EvidenceGap, Verification
from pipeline.facts import FactSet
from pipeline.guards import unsupported_facts
from pipeline.text import normalize

_ALLOWED = frozenset({Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE})
_CONCLUSIONS = frozenset(
    {ClaimKind.ROOT_CAUSE, ClaimKind.CONTRIBUTING_FACTOR, ClaimKind.CORRELATION}
)
RATIONALE_WITHHELD = "The Verifier's rationale referred to withheld claims and is not shown."


def build_composer_input(
    *,
    query: str,
    verdict: Verdict,
    claims: Sequence[VerifiedClaim],
    checks: Sequence[ClaimCheck],
    gaps: Sequence[EvidenceGap],
    executor_output: ExecutorEvidenceV2,
    rationale: str,
) -> ComposerInput:
    """Only what the checks allow. REJECT keeps no hypotheses and no conclusions."""
    verification = {c.claim_id: c.verification for c in checks}
    allowed: list[AllowedClaim] = []
    hypotheses: list[AllowedHypothesis] = []
    withheld: list[str] = []
    for claim in claims:
        kind = verification.get(claim.claim_id, Verification.UNSUPPORTED)
        if _is_allowed(claim, kind, verdict):
            allowed.append(AllowedClaim(
                claim_id=claim.claim_id, text=claim.text, kind=claim.kind,
                critical=claim.critical, verification=kind,
            ))
        elif verdict is not Verdict.REJECT and kind in (*_ALLOWED, Verification.OVERSTATED):
            hypotheses.append(AllowedHypothesis(text=claim.text, claim_ids=[claim.claim_id]))
        else:
            withheld.append(claim.text)
    # claims that failed the Gatekeeper are withheld too: Executor text repeating them is not
    # screened by any check and must not reach the Composer through gaps, hypotheses or actions
    verified = {c.claim_id for c in claims}
    withheld += [c.text for c in executor_output.claims if c.claim_id not in verified]
    usable = {c.claim_id for c in allowed} | {i for h in hypotheses for i in h.claim_ids}
    leak = _LeakFilter(withheld, kept=[query, *(c.text for c in allowed),
                                        *(h.text for h in hypotheses)])
    if verdict is not Verdict.REJECT:
        hypotheses += _executor_hypotheses(executor_output, usable, claims, leak)
    return ComposerInput(
        original_query=query,
        verdict=verdict,
        allowed_claims=allowed,
        allowed_hypotheses=hypotheses,
        missing_info=_dedupe(
            leak.keep([g.description for g in gaps] + executor_output.missing_info)
        ),
        recommended_actions=[
            ComposerAction(text=a.text, claim_ids=a.claim_ids)
            for a in executor_output.recommended_actions
            if set(a.claim_ids) <= {c.claim_id for c in allowed} and leak.clean(a.text)
        ],
        rationale=rationale if leak.clean(rationale) else RATIONALE_WITHHELD,
    )


def _is_allowed(claim: VerifiedClaim, kind: Verification, verdict: Verdict) -> bool:
    if kind not in _ALLOWED or claim.status is ClaimStatus.HYPOTHESIS:
        return False
    if verdict is Verdict.REJECT:
        return kind is Verification.DIRECT_OBSERVATION and claim.kind not in _CONCLUSIONS
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
        kept.append(AllowedHypothesis(text=hypothesis.text, claim_ids=list(ids)))
    return kept


class _LeakFilter:
    """Rejects text that repeats a withheld claim or states a fact only withheld claims state."""

    def __init__(self, withheld: Sequence[str], *, kept: Sequence[str]) -> None:
        self._withheld_texts = [normalize(t) for t in withheld if normalize(t)]
        self._withheld = FactSet.from_texts(withheld)
        self._kept = FactSet.from_texts(kept)

    def clean(self, text: str) -> bool:
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
