"""The one EVIDENCE_GAP_ONLY cycle supplements the first: pure functions over the state.

When the Verifier leaves a critical gap, the run plans again from the gaps alone. What the first
cycle verified stays: its claims with their passed bindings are carried over (`carry`), the gap
cycle's claims are added to them (`supplement`), and the Gatekeeper and the Verifier judge the
union over every invocation of the run. A root cause confirmed in cycle one is therefore still
there to be composed when the gap is closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.gatekeeper import GatekeeperOutcome
from models.state import NextStep, PipelineState, RuntimeState
from models.verifier import EvidenceGap, RetryContext

_LISTS = ("hypotheses", "missing_info", "recommended_actions")


def carry(document: Mapping[str, Any], outcome: GatekeeperOutcome) -> dict[str, Any]:
    """The verified part of a cycle's Executor document: claims with at least one passed
    binding, each keeping only its passed bindings, and the hypotheses and actions that cite
    only those claims (or none)."""
    passed: dict[str, list[dict[str, Any]]] = {}
    for evidence in outcome.verified_evidence:
        passed.setdefault(evidence.claim_id, []).append({
            "invocation_id": evidence.invocation_id, "tool_name": evidence.tool_name,
            "path": evidence.path, "matched_text": evidence.matched_text})
    verified = {claim.claim_id for claim in outcome.verified_output.claims}
    claims = [
        {**claim, "evidence_bindings": passed.get(claim["claim_id"], [])}
        for claim in document.get("claims", [])
        if isinstance(claim, Mapping) and claim.get("claim_id") in verified
    ]
    kept: dict[str, Any] = {"claims": claims}
    for key in ("hypotheses", "recommended_actions"):
        kept[key] = [item for item in document.get(key, [])
                     if set(item.get("claim_ids", [])) <= verified]
    kept["missing_info"] = list(document.get("missing_info", []))
    return kept


def supplement(carried: Mapping[str, Any], document: Mapping[str, Any]) -> dict[str, Any]:
    """The union of the carried claims and a gap cycle's document.

    A gap-cycle claim id that the first cycle already used is renamed `g<n>-<id>` (and so are
    its citations in the gap cycle's hypotheses and actions), so no claim overwrites another;
    list items already present are not repeated.
    """
    taken = {claim["claim_id"] for claim in carried.get("claims", [])}
    renames: dict[str, str] = {}
    claims = [dict(claim) for claim in carried.get("claims", [])]
    for claim in document.get("claims", []):
        claim = dict(claim)
        old = str(claim.get("claim_id"))
        if old in taken:
            new, n = old, 1
            while new in taken:
                new, n = f"g{n}-{old}", n + 1
            renames[old] = new
            claim["claim_id"] = new
        taken.add(str(claim["claim_id"]))
        claims.append(claim)
    merged: dict[str, Any] = {**{k: v for k, v in document.items() if k not in _LISTS},
                              "claims": claims}
    for key in _LISTS:
        items = list(carried.get(key, []))
        for item in document.get(key, []):
            if isinstance(item, Mapping) and "claim_ids" in item:
                item = {**item, "claim_ids": [renames.get(c, c) for c in item["claim_ids"]]}
            if item not in items:
                items.append(item)
        merged[key] = items
    return merged


def start_gap_cycle(
    state: RuntimeState, document: Mapping[str, Any], gaps: list[EvidenceGap]
) -> RuntimeState:
    """The state that plans the EVIDENCE_GAP_ONLY cycle: a fresh pipeline that knows the gaps,
    carrying what this cycle verified."""
    pipeline = state.pipeline
    assert pipeline.gatekeeper is not None
    count = pipeline.evidence_retry_count + 1
    fresh = PipelineState(
        query=pipeline.query, intent=pipeline.intent, evidence_retry_count=count,
        retry_context=RetryContext(evidence_retry_count=count,
                                   previous_gaps=[g.description for g in gaps]),
    )
    carried = carry(document, pipeline.gatekeeper)
    if state.carried is not None:
        carried = supplement(state.carried, carried)
    return state.model_copy(update={
        "pipeline": fresh, "plan": None, "transcript": None, "retry_gaps": gaps,
        "attempt_counters": {}, "carried": carried, "next": NextStep(node="plan")})
