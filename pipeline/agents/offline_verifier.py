"""The offline Verifier: a lexical comparison of each claim's facts with its verified evidence.

Classification of one claim, from its own verified evidence only:
- a number, identifier, error code, version or time that differs from the evidence, or an
  identifying fact (error code, version, identifier) the evidence never states: contradicted;
- no fact and few of its words in the evidence: unsupported;
- some facts missing, or an entity the evidence never names: overstated (unsupported if none
  of its facts is there);
- all facts present: direct_observation for findings, reasonable_inference for conclusions
  (root causes, contributing factors, correlations, or causal wording).

A root cause drawn from two or more sources that names a component only one of them states (a
deploy whose change concerns another service, say) must also show its mechanism, not only its
timing: some fact of the claim other than a time and the services every source is about (that
component, a version, a value) must be stated by two of its sources, as when the errors after a
pool cut name the pool's database. Failing that, a verified critical finding from another source
that names the component may corroborate it. A root cause with neither rests on a temporal
correlation alone: overstated, with a critical gap that asks for the component's metrics. One
that names no such component ("memory reached its limit, so the container was OOMKilled") is
left as it is: which signals of one service explain each other is beyond a lexical check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from models.executor import CONCLUSIONS, ClaimKind, ClaimStatus
from models.gatekeeper import VerifiedClaim, VerifiedEvidence
from models.verifier import ClaimCheck, EvidenceGap, Verification, VerifierInput, VerifierOutput
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.rules.facts import KEY_KINDS, Fact, FactKind, FactMemo, extract_facts
from pipeline.rules.guards import evidence_facts, scope_problem
from pipeline.rules.intervals import worked_out
from pipeline.rules.verdict import rule_verdict

MODEL_NAME = "offline-lexical-verifier-1"
_SIGNAL_KINDS = frozenset({ClaimKind.FINDING, ClaimKind.CORRELATION})
_CAUSAL = re.compile(
    r"\b(caus\w*|because|due to|led to|leads? to|result\w* in|trigger\w*|responsible)\b", re.I
)
_WORD = re.compile(r"[a-z][a-z0-9_-]{3,}")
_STOP = frozenset(
    "that this with from were have been into than then there their about after before during "
    "while which when what also only more most over under between within".split()
)
_SCORE = {
    Verification.DIRECT_OBSERVATION: 1.0, Verification.REASONABLE_INFERENCE: 0.7,
    Verification.OVERSTATED: 0.4, Verification.UNSUPPORTED: 0.0,
    Verification.EXTERNAL_UNKNOWN: 0.0, Verification.CONTRADICTED: 0.0,
}
_TOOL_FOR_KIND = {
    FactKind.QUANTITY: "query_metrics", FactKind.ERROR_CODE: "search_logs",
    FactKind.VERSION: "list_deployments", FactKind.TIMESTAMP: "search_logs",
    FactKind.IDENTIFIER: "get_events", FactKind.SERVICE: "search_logs",
}
"""The tool a gap suggests per kind of missing fact; any other kind (a name, or a kind added to
the extractor later) suggests `search_logs`, never a KeyError."""
_DEFAULT_TOOL = "search_logs"


class OfflineVerifier:
    """Deterministic Verifier used without an API key; also a reference for the guards."""

    model = MODEL_NAME

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """Verify the serialized VerifierInput; answer with VerifierOutput JSON."""
        output = verify(VerifierInput.model_validate_json(payload))
        return ModelReply(text=output.model_dump_json())


def verify(verifier_input: VerifierInput) -> VerifierOutput:
    """Check every verified claim against its own verified evidence."""
    claims = verifier_input.verified_executor_output.claims
    memo: FactMemo = {}
    evidence_of: dict[str, list[VerifiedEvidence]] = {c.claim_id: [] for c in claims}
    for item in verifier_input.verified_evidence:
        evidence_of.setdefault(item.claim_id, []).append(item)
    first = [classify(claim, evidence_of[claim.claim_id], memo=memo) for claim in claims]
    corroborating = _corroborating_evidence(claims, [check for check, _ in first], evidence_of)
    checks: list[ClaimCheck] = []
    gaps: list[EvidenceGap] = []
    for claim, (check, missing) in zip(claims, first, strict=True):
        link_gap = None
        if claim.kind is ClaimKind.ROOT_CAUSE and (
                check.verification is Verification.REASONABLE_INFERENCE):
            check, link_gap = judge_mechanism(claim, check, evidence_of[claim.claim_id],
                                              corroborating=corroborating, memo=memo)
        checks.append(check)
        if link_gap is not None:
            gaps.append(link_gap)
        elif claim.critical and (check.verification in (
            Verification.UNSUPPORTED, Verification.OVERSTATED, Verification.EXTERNAL_UNKNOWN
        ) or check.note == _FABRICATED):
            # a key fact its evidence lacks: fabricated as it stands, and what a tool could show
            gaps.append(evidence_gap(claim, missing))
    ceiling = verifier_input.verdict_ceiling
    verdict = min(rule_verdict(claims, checks), ceiling, key=lambda v: v.rank)
    return VerifierOutput(
        verdict=verdict,
        groundedness_score=_groundedness(claims, checks),
        rationale=_rationale(checks),
        claim_checks=checks,
        evidence_gaps=gaps,
    )


_FABRICATED = "a key fact (entity, code, identifier, number) is absent from its evidence"


def classify(
    claim: VerifiedClaim, evidence: Sequence[VerifiedEvidence], *, memo: FactMemo | None = None
) -> tuple[ClaimCheck, list[Fact]]:
    """One claim's verification class, and the facts its evidence does not state (`memo`:
    evidence texts already extracted in this verification)."""
    refs = [e.evidence_id for e in evidence]
    known = evidence_facts(evidence, memo=memo)
    facts = extract_facts(claim.text, single_digits=True)  # "slot 9" against "slot 8" too
    # "within 30 seconds", "between 13:59 and 14:03": readings of its times, not values to find
    readings = worked_out(claim.text, [e.matched_text for e in evidence], known)
    facts = [f for f in facts if f not in readings]
    conflicting = [f for f in facts if known.conflicts(f)]
    invented = [f for f in facts if f.kind in KEY_KINDS and not known.supports(f)]
    missing = [f for f in facts if not known.supports(f)]

    def check(verification: Verification, note: str) -> tuple[ClaimCheck, list[Fact]]:
        return ClaimCheck(
            claim_id=claim.claim_id, verification=verification, evidence_refs=refs, note=note
        ), missing

    if conflicting:
        return check(Verification.CONTRADICTED, "a stated value differs from its evidence")
    if invented:
        return check(Verification.CONTRADICTED, _FABRICATED)
    wider = scope_problem(claim.text, evidence,
                          negative=claim.kind is ClaimKind.NEGATIVE_OBSERVATION)
    if wider is not None:
        return check(Verification.OVERSTATED, wider)
    if not facts:
        overlap = _word_overlap(claim.text, [e.matched_text for e in evidence])
        if overlap < 0.3:
            return check(Verification.UNSUPPORTED, "its evidence does not state what it says")
        if overlap < 0.6 or _is_conclusion(claim):
            return check(Verification.REASONABLE_INFERENCE, "follows from its evidence")
        return check(Verification.DIRECT_OBSERVATION, "its evidence states it")
    if missing:
        if len(missing) == len(facts):
            return check(Verification.UNSUPPORTED, "none of its facts is in its evidence")
        return check(Verification.OVERSTATED, "some of its facts are not in its evidence")
    if _is_conclusion(claim):
        return check(Verification.REASONABLE_INFERENCE, "facts observed; the link is inferred")
    return check(Verification.DIRECT_OBSERVATION, "every fact is in its evidence")


def judge_mechanism(
    claim: VerifiedClaim,
    check: ClaimCheck,
    evidence: Sequence[VerifiedEvidence],
    *,
    corroborating: Sequence[VerifiedEvidence] = (),
    memo: FactMemo | None = None,
) -> tuple[ClaimCheck, EvidenceGap | None]:
    """Hold a root cause whose facts are all observed, and which names a component only one
    of its sources states, to a shown mechanism.

    `corroborating`: evidence of verified critical findings, any of which may corroborate the
    claim when it comes from another source and names a component the claim names. Returns
    the check (unchanged, corroborated, or overstated) and the gap an overstated one leaves.
    """
    link = mechanism_link(claim.text, evidence, memo=memo)
    if link.shown or not link.components:
        return check, None
    components = {f.key for f in link.components}
    support = [e for e in corroborating
               if e.claim_id != claim.claim_id and e.invocation_id not in link.sources
               and any(_names(e, key, memo) for key in components)]
    if support:
        refs = [*check.evidence_refs, *(e.evidence_id for e in support)]
        return check.model_copy(update={
            "evidence_refs": list(dict.fromkeys(refs)),
            "note": "facts observed; its link is corroborated by a finding on "
                    + ", ".join(sorted(components)),
        }), None
    overstated = check.model_copy(update={
        "verification": Verification.OVERSTATED,
        "note": "its sources share nothing but time: the causal link is not shown",
    })
    return overstated, _mechanism_gap(claim, link)


@dataclass(frozen=True, slots=True)
class MechanismLink:
    """What ties a conclusion's sources to each other beyond time."""

    sources: frozenset[str]
    """The invocations its evidence comes from."""
    shown: bool
    """Fewer than two sources, or a fact of the claim stated by two of them."""
    components: list[Fact]
    """Services the claim names that only one source states (not those every source is about)."""
    subjects: list[str]
    """The services every source is about."""


def mechanism_link(
    text: str, evidence: Sequence[VerifiedEvidence], *, memo: FactMemo | None = None
) -> MechanismLink:
    """Which of the claim's facts, other than times and the common subject, its sources share."""
    by_source: dict[str, list[VerifiedEvidence]] = {}
    for item in evidence:
        by_source.setdefault(item.invocation_id, []).append(item)
    scopes = [{(e.scope.service or "").lower() for e in items} - {""}
              for items in by_source.values()]
    subjects = sorted(set.intersection(*scopes)) if scopes else []
    sources = frozenset(by_source)
    if len(by_source) < 2:
        return MechanismLink(sources, True, [], subjects)
    stated = [evidence_facts(items, memo=memo) for items in by_source.values()]
    facts = [f for f in extract_facts(text) if f.kind is not FactKind.TIMESTAMP
             and not (f.kind is FactKind.SERVICE and f.key in subjects)]
    counts = [sum(1 for known in stated if known.supports(f)) for f in facts]
    components = list({f.key: f for f, n in zip(facts, counts, strict=True)
                       if f.kind is FactKind.SERVICE and n == 1}.values())
    return MechanismLink(sources, any(n >= 2 for n in counts), components, subjects)


def _corroborating_evidence(
    claims: Sequence[VerifiedClaim],
    checks: Sequence[ClaimCheck],
    evidence_of: dict[str, list[VerifiedEvidence]],
) -> list[VerifiedEvidence]:
    """Evidence of confirmed critical findings its own evidence states directly."""
    return [
        item for claim, check in zip(claims, checks, strict=True)
        if claim.critical and claim.kind in _SIGNAL_KINDS
        and claim.status is ClaimStatus.CONFIRMED
        and check.verification is Verification.DIRECT_OBSERVATION
        for item in evidence_of[claim.claim_id]
    ]


def _names(item: VerifiedEvidence, service: str, memo: FactMemo | None) -> bool:
    return evidence_facts([item], memo=memo).supports(
        Fact(FactKind.SERVICE, service, service))


def _mechanism_gap(claim: VerifiedClaim, link: MechanismLink) -> EvidenceGap:
    component = link.components[0].text
    return EvidenceGap(
        claim_id=claim.claim_id,
        description=f"Claim {claim.claim_id} ties its cause to its effect by time alone: none "
                    f"of its evidence shows {component}, which it names, behaving differently; "
                    f"the metrics of {component} would show whether it did.",
        critical=claim.critical, suggested_tool="query_metrics",
    )


def _is_conclusion(claim: VerifiedClaim) -> bool:
    return claim.kind in CONCLUSIONS or _CAUSAL.search(claim.text) is not None


def _word_overlap(text: str, evidence: Sequence[str]) -> float:
    words = {w for w in _WORD.findall(text.lower()) if w not in _STOP}
    if not words:
        return 0.0
    haystack = " ".join(evidence).lower()
    return sum(1 for w in words if w in haystack) / len(words)


def evidence_gap(claim: VerifiedClaim, missing: Sequence[Fact]) -> EvidenceGap:
    kinds = sorted({f.kind for f in missing}, key=lambda k: k.value)
    what = ", ".join(k.value.replace("_", " ") for k in kinds) or "its statement"
    return EvidenceGap(
        claim_id=claim.claim_id,
        description=f"Claim {claim.claim_id} needs evidence for its {what}.",
        critical=claim.critical,
        suggested_tool=_TOOL_FOR_KIND.get(kinds[0], _DEFAULT_TOOL) if kinds else _DEFAULT_TOOL,
    )


def _groundedness(claims: Sequence[VerifiedClaim], checks: Sequence[ClaimCheck]) -> float:
    weights = {c.claim_id: 2.0 if c.critical else 1.0 for c in claims}
    total = sum(weights.values())
    if not total:
        return 0.0
    score = sum(weights[c.claim_id] * _SCORE[c.verification] for c in checks) / total
    return round(score, 3)


def _rationale(checks: Sequence[ClaimCheck]) -> str:
    counts: dict[str, int] = {}
    for check in checks:
        counts[check.verification.value] = counts.get(check.verification.value, 0) + 1
    parts = [f"{name}: {n}" for name, n in sorted(counts.items())]
    return "Lexical check of each claim against its verified evidence. " + "; ".join(parts) + "."

