"""Re-verification of stored runs: judge one again with today's agents and rules, and report
what changed over a batch. Pure functions over contracts; the batch job (tasks/batch.py) and
the store do the I/O.

A stored run is re-judged from its stored invocations and its stored Executor output, through
the same graph a live run drives (`verify_bundle`: parse, gatekeep, verify, compose or the
fallback): no tool, Planner or Executor runs again, and the stored run is never written.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from models.batch import (
    NULL_VERDICT,
    BatchRecord,
    BatchStatus,
    ClaimChange,
    ItemDetail,
    ItemRecord,
    ItemResult,
    ItemStatus,
)
from models.bundle import RunBundle
from models.common import Verdict
from models.run import LlmAttempt, RunRecord
from pipeline.config import VeritySettings
from pipeline.errors import StoreError
from pipeline.model import Model
from pipeline.verification import verify_bundle

NULL = NULL_VERDICT

_RANK = {Verdict.PASS.value: 3, Verdict.LOW_CONFID.value: 2, Verdict.REJECT.value: 1, NULL: 0}

_LOG = logging.getLogger(__name__)


def verdict_label(verdict: str | None) -> str:
    """A verdict as the report's rows and columns name it: PASS, LOW_CONFID, REJECT or null."""
    return verdict or NULL


def judge(
    seq: int, bundle: RunBundle, stored: RunRecord, *, verifier: Model,
    composer: Model, settings: VeritySettings | None = None,
) -> tuple[ItemResult, list[LlmAttempt]]:
    """Re-judge one stored run: its new outcome beside the stored one, and today's model
    attempts."""
    verified = verify_bundle(bundle, verifier=verifier, composer=composer, run_id=stored.run_id,
                             settings=settings)
    result = verified.result
    new = result.self_evaluation.verifier_evaluation
    old = stored.self_evaluation.verifier_evaluation if stored.self_evaluation else None
    old_checks = {c.claim_id: c.verification for c in old.claim_checks} if old else {}
    new_checks = {c.claim_id: c.verification for c in new.claim_checks}
    claims = [ClaimChange(claim_id=cid, old=old_checks.get(cid), new=new_checks.get(cid))
              for cid in dict.fromkeys([*old_checks, *new_checks])]
    attempts = verified.attempts
    detail = ItemDetail(
        old_severity=_severity(old.gatekeeper_result if old else None),
        new_severity=_severity(new.gatekeeper_result),
        old_failed_rules=_rules(old.gatekeeper_result if old else None),
        new_failed_rules=_rules(new.gatekeeper_result),
        claims=claims, downgrades=list(new.downgrades), rationale=new.rationale,
        prompts=sorted({f"{a.role}:{a.prompt_name}@{a.prompt_version}" for a in attempts}),
        models=sorted({a.model for a in attempts}),
        new_failure_reason=new.failure_reason.value if new.failure_reason else None,
    )
    item = ItemResult(
        seq=seq, run_id=stored.run_id, status=ItemStatus.DONE,
        old_status=stored.status.value, old_verdict=_value(stored.verdict),
        old_fallback_type=_value(stored.fallback_type),
        new_status=result.status, new_verdict=_value(result.verdict),
        new_fallback_type=_value(result.fallback_type), detail=detail,
        input_tokens=sum(a.input_tokens for a in attempts),
        output_tokens=sum(a.output_tokens for a in attempts),
        cost_usd=round(sum(a.cost_usd for a in attempts), 8),
    )
    return item, list(attempts)


def lost_invocations(stored: RunRecord, bundle: RunBundle) -> list[str]:
    """Invocations the stored run's Gatekeeper checked a binding against and passed, but that
    are no longer stored: re-judging without them would report a loss of data as a change of
    verdict, so the item is an error instead."""
    evaluation = stored.self_evaluation
    gatekeeper = evaluation.verifier_evaluation.gatekeeper_result if evaluation else None
    if gatekeeper is None:
        return []
    present = {i.tool_call_id for i in bundle.invocations}
    passed = dict.fromkeys(b.invocation_id for b in gatekeeper.checked_bindings
                           if b.status == "pass")
    return [i for i in passed if i not in present]


def failed_item(seq: int, run_id: str, reason: str, stored: RunRecord | None = None
                ) -> ItemResult:
    """An item whose stored run cannot be re-judged: a one-line reason, never a crash."""
    line = " ".join(reason.split())[:300] or "unknown error"
    return ItemResult(
        seq=seq, run_id=run_id, status=ItemStatus.ERROR, error=line,
        old_status=stored.status.value if stored else None,
        old_verdict=_value(stored.verdict) if stored else None,
        old_fallback_type=_value(stored.fallback_type) if stored else None,
    )


def _value(enum: Any) -> str | None:
    return None if enum is None else str(enum.value)


def _severity(gatekeeper: Any) -> str | None:
    return gatekeeper.severity.value if gatekeeper is not None else None


def _rules(gatekeeper: Any) -> list[str]:
    return [r.value for r in gatekeeper.failed_rules] if gatekeeper is not None else []


# --- the report ------------------------------------------------------------------------------

@dataclass
class Report:
    """What a batch changed, accumulated item by item (memory bounded by distinct keys and by
    `max_flips`, not by the batch size)."""

    max_flips: int = 200
    items: int = 0
    done: int = 0
    errors: int = 0
    transitions: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    rules: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    claim_classes: Counter[str] = field(default_factory=Counter)
    by_prompts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    flips: list[dict[str, Any]] = field(default_factory=list)
    flips_total: int = 0
    error_samples: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, item: ItemRecord) -> None:
        """Count one item."""
        self.items += 1
        if item.status is ItemStatus.ERROR:
            self.errors += 1
            if len(self.error_samples) < self.max_flips:
                self.error_samples.append({"run_id": item.run_id, "error": item.error})
            return
        if item.status is not ItemStatus.DONE:
            return
        self.done += 1
        old, new = verdict_label(item.old_verdict), verdict_label(item.new_verdict)
        self.transitions[old][new] += 1
        self.input_tokens += item.input_tokens
        self.output_tokens += item.output_tokens
        self.cost_usd += item.cost_usd
        detail = item.detail or ItemDetail()
        self.by_prompts[", ".join(detail.prompts) or "(no model call)"][f"{old} -> {new}"] += 1
        for rule in set(detail.new_failed_rules) - set(detail.old_failed_rules):
            self.rules[rule]["now_fails"] += 1
        for rule in set(detail.old_failed_rules) - set(detail.new_failed_rules):
            self.rules[rule]["now_passes"] += 1
        changed = [c for c in detail.claims if c.old != c.new]
        for change in changed:
            self.claim_classes[f"{_class(change.old)} -> {_class(change.new)}"] += 1
        if old != new:
            self.flips_total += 1
            self._keep_flip(item, old, new, changed, detail)

    def _keep_flip(self, item: ItemRecord, old: str, new: str, changed: Sequence[ClaimChange],
                   detail: ItemDetail) -> None:
        flip = {"run_id": item.run_id, "old_verdict": old, "new_verdict": new,
                "old_status": item.old_status, "new_status": item.new_status,
                "severity": _RANK[old] - _RANK[new],
                "claims": [{"claim_id": c.claim_id, "old": _class(c.old), "new": _class(c.new)}
                           for c in changed],
                "rationale": detail.rationale, "downgrades": detail.downgrades,
                "failed_rules": detail.new_failed_rules}
        self.flips.append(flip)
        # the worst flips first (PASS -> REJECT before PASS -> LOW_CONFID), then batch order
        self.flips.sort(key=lambda f: -f["severity"])
        del self.flips[self.max_flips:]

    def as_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        labels = [v for v in _RANK if v in self.transitions
                  or any(v in row for row in self.transitions.values())]
        return {
            "items": self.items, "judged": self.done, "errors": self.errors,
            "verdict_labels": labels,
            "transitions": {old: {new: self.transitions[old][new] for new in labels}
                            for old in labels if old in self.transitions},
            "changed_verdicts": self.flips_total,
            "rules": {rule: dict(counts) for rule, counts in sorted(self.rules.items())},
            "claim_class_changes": dict(self.claim_classes.most_common()),
            "by_prompts": {key: dict(counts) for key, counts in sorted(self.by_prompts.items())},
            "flips": self.flips,
            "error_samples": self.error_samples,
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost_usd": round(self.cost_usd, 6),
        }


def build_report(items: Iterable[ItemRecord], *, max_flips: int = 200) -> Report:
    """The report over a stream of items."""
    report = Report(max_flips=max_flips)
    for item in items:
        report.add(item)
    return report


def _class(verification: Any) -> str:
    return verification.value if verification is not None else NULL


# --- one chunk of a batch --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ChunkOutcome:
    """What one chunk task did."""

    judged: int
    """Items this call wrote (0 for a re-sent chunk whose items had landed)."""
    stopped: str | None = None
    """Why it stopped before its end: the batch was cancelled or had ended."""


Judges = tuple[Model, Model]
"""The Verifier and the Composer a batch re-judges with."""


def judge_chunk(
    store: Any, batch_id: str, *, start: int, end: int, judges: Callable[[BatchRecord], Judges],
    settings: VeritySettings | None = None, flush_every: int = 10, concurrent: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ChunkOutcome:
    """Re-judge the chunk's PENDING items [start, end) and write their results every
    `flush_every` items; stop at the next flush once the batch is no longer RUNNING
    (cancelled). `concurrent` judges the whole chunk at once, one thread per item (so that
    Message Batches gather its requests), and writes once. An item that cannot be re-judged
    is an item error with a one-line reason; only the store's own errors end the chunk (its
    message is retried).

    The store's reads and writes run on one I/O thread beside the judging: the next group's
    runs are read, and the last group's results written, while this group is judged (the
    database works on another core meanwhile). A write's error is raised before the next."""
    batch = store.get_batch(batch_id)
    if batch.status is not BatchStatus.RUNNING:
        return ChunkOutcome(0, stopped=batch.status.value)
    pending = store.pending_items(batch_id, start=start, end=end)
    verifier, composer = judges(batch)
    step = max(len(pending), 1) if concurrent else flush_every
    groups = [pending[first:first + step] for first in range(0, len(pending), step)]

    def load(part: Sequence[tuple[int, str]]) -> dict[str, Any]:
        return dict(store.load_for_judging([run_id for _, run_id in part],
                                           tenant_id=batch.tenant_id))

    def judged_group(part: Sequence[tuple[int, str]], loaded: dict[str, Any]
                     ) -> list[tuple[ItemResult, list[LlmAttempt]]]:
        def one(item: tuple[int, str]) -> tuple[ItemResult, list[LlmAttempt]]:
            return _judge_one(item[0], item[1], loaded[item[1]], verifier=verifier,
                              composer=composer, settings=settings)

        if concurrent and len(part) > 1:
            with ThreadPoolExecutor(max_workers=len(part),
                                    thread_name_prefix="verity-judge") as pool:
                return list(pool.map(one, part))
        return [one(item) for item in part]

    judged, done = 0, 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verity-batch-io") as io:
        loading = io.submit(load, groups[0]) if groups else None
        writing: Future[int] | None = None
        for index, part in enumerate(groups):
            if index:
                status = store.get_batch(batch_id).status
                if status is not BatchStatus.RUNNING:
                    judged += writing.result() if writing is not None else 0
                    return ChunkOutcome(judged, stopped=status.value)
            assert loading is not None
            loaded = loading.result()
            if index + 1 < len(groups):
                loading = io.submit(load, groups[index + 1])
            results = judged_group(part, loaded)
            if writing is not None:
                judged += writing.result()
            writing = io.submit(store.record_items, batch_id, [r for r, _ in results],
                                [a for _, spent in results for a in spent])
            done += len(part)
            if progress is not None:
                progress(done, len(pending))
        judged += writing.result() if writing is not None else 0
    return ChunkOutcome(judged)


def _judge_one(
    seq: int, run_id: str, entry: tuple[RunRecord, RunBundle] | str, *,
    verifier: Model, composer: Model, settings: VeritySettings | None,
) -> tuple[ItemResult, list[LlmAttempt]]:
    if isinstance(entry, str):
        return failed_item(seq, run_id, entry), []
    record, bundle = entry
    lost = lost_invocations(record, bundle)
    if lost:
        return failed_item(seq, run_id, f"invocation {lost[0]} that its claims were checked "
                           f"against is missing ({len(lost)} missing)", record), []
    try:
        return judge(seq, bundle, record, verifier=verifier, composer=composer,
                     settings=settings)
    except StoreError:
        raise
    except Exception as exc:  # one run that cannot be re-judged never crashes the batch
        _LOG.warning("re-judging run %s failed", run_id, exc_info=True)
        return failed_item(seq, run_id, f"{type(exc).__name__}: {exc}", record), []
