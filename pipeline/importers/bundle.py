"""An imported run as a Verity run bundle: its calls as invocations, its answer split into
claims (`pipeline.rules.prose`, or as an extractor read them: `pipeline.rules.extracted`), each
claim bound to the tool output that carries its facts (`pipeline.rules.binder`), written as the
Executor output a Verity run would hold. Claims the binder finds nothing for stay in the
bundle's `imported` section, unbound: they cannot be verified, and a critical one keeps the
verdict from passing."""

from __future__ import annotations

import json
from collections.abc import Callable

from models.bundle import ImportedAnswer, ImportedClaim, RunBundle
from models.common import Intent
from models.executor import (
    Claim,
    ClaimKind,
    ClaimStatus,
    EvidenceBinding,
    ExecutorEvidenceV2,
    RecommendedAction,
)
from models.invocation import ToolInvocation
from pipeline.config import VeritySettings
from pipeline.errors import TranscriptError
from pipeline.importers.evidence import invocation_of
from pipeline.importers.record import ImportedRun
from pipeline.rules.binder import bind
from pipeline.rules.facts import extract_facts
from pipeline.rules.prose import ProseClaim, quotations, split_claims

DEFAULT_QUESTION = "Is this diagnosis supported by the evidence it was given?"
"""The question of an imported run whose source has none (plain files without --question)."""


def to_bundle(run: ImportedRun, *, question: str | None = None,
              settings: VeritySettings | None = None,
              extract: Callable[[str], list[ProseClaim]] | None = None) -> RunBundle:
    """The bundle of `run`: `question` (else the run's own, else DEFAULT_QUESTION) as its
    query, its answer's claims those `extract` finds (default `split_claims`). TranscriptError
    when the run has no claim to check or repeats a tool call id."""
    limits = settings or VeritySettings()
    invocations = _invocations(run, limits)
    prose = (extract or split_claims)(run.answer)
    if not any(not p.action for p in prose):
        raise TranscriptError("the answer states nothing to check (no sentence, list item or "
                              "table row with a fact)")
    claims: list[Claim] = []
    imported: list[ImportedClaim] = []
    actions: list[tuple[ProseClaim, str]] = []
    for number, item in enumerate((p for p in prose if not p.action), start=1):
        claim_id = f"c{number}"
        bindings = bind(item.plain, invocations, quoted=quotations(item.text),
                        negative=item.kind is ClaimKind.NEGATIVE_OBSERVATION)
        if bindings:
            claims.append(_claim(claim_id, item, bindings))
        imported.append(_imported(claim_id, item, bound=bool(bindings)))
    for number, item in enumerate((p for p in prose if p.action), start=1):
        actions.append((item, f"a{number}"))
        imported.append(_imported(f"a{number}", item, bound=False))
    output = ExecutorEvidenceV2(claims=claims, recommended_actions=[
        RecommendedAction(text=item.plain, claim_ids=_motivating(item, claims))
        for item, _ in actions])
    imported.sort(key=lambda c: c.start)
    return RunBundle(
        query=(question or run.question or DEFAULT_QUESTION).strip()[:limits.query_max_chars],
        intent=Intent.DIAGNOSIS,
        invocations=invocations,
        executor_output_raw=json.dumps(output.model_dump(mode="json"), ensure_ascii=False),
        imported=ImportedAnswer(format=run.format, agent=run.agent, answer=run.answer,
                                claims=imported, trace_id=run.trace_id, span_id=run.span_id,
                                response_id=run.response_id),
    )


def _invocations(run: ImportedRun, limits: VeritySettings) -> list[ToolInvocation]:
    if len(run.calls) > limits.bundle_max_invocations:
        raise TranscriptError(f"the run made {len(run.calls)} tool calls; at most "
                              f"{limits.bundle_max_invocations} are imported "
                              "(VERITY_BUNDLE_MAX_INVOCATIONS)")
    seen: set[str] = set()
    invocations = []
    for call in run.calls:
        if call.call_id in seen:
            raise TranscriptError(f"tool call id {call.call_id!r:.80} is used twice; the second "
                                  "call would overwrite the first")
        seen.add(call.call_id)
        invocations.append(invocation_of(call, max_items=limits.import_projection_max_items,
                                         max_bytes=limits.import_projection_max_bytes))
    return invocations


def _claim(claim_id: str, item: ProseClaim, bindings: list[EvidenceBinding]) -> Claim:
    return Claim(claim_id=claim_id, text=item.plain, kind=item.kind, critical=item.critical,
                 status=ClaimStatus.HYPOTHESIS if item.hedged else ClaimStatus.CONFIRMED,
                 evidence_bindings=bindings)


def _imported(claim_id: str, item: ProseClaim, *, bound: bool) -> ImportedClaim:
    return ImportedClaim(claim_id=claim_id, text=item.text, start=item.start, end=item.end,
                         kind=item.kind, critical=item.critical, hedged=item.hedged,
                         action=item.action, bound=bound)


def _motivating(action: ProseClaim, claims: list[Claim]) -> list[str]:
    """The bound claims an action shares a fact with (the deploy it rolls back)."""
    keys = {(f.kind, f.key) for f in extract_facts(action.plain)}
    return [c.claim_id for c in claims
            if keys & {(f.kind, f.key) for f in extract_facts(c.text)}]
