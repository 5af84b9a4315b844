"""What a model can make Verity say: the model-reply corpus through both paths, as one JSON
object on stdout.

    python bench/answers.py [--kind adversarial|faithful|all] [--paths verify,run]
                            [--per-category N] [--repeat R]

The corpus (`tests/data/model_replies/`, see its README) holds adversarial entries (what a
Composer, Verifier or Executor might invent, each naming the strings that must not be published)
and faithful Composer replies. Every entry is replayed (`tests/model_replies.py`) with the
entry's role answering as written and every other role answering like Claude, over real HTTP
to the fake Messages API server with the Anthropic provider, on two paths:

- verify: `verity verify BUNDLE --provider anthropic` on the scenario's bundle (exported from a
  like-Claude run of the scenario at the start; an Executor patch is applied to its stored
  output);
- run: `verity run QUERY --scenario NAME` with the Claude agents (VERITY_PROVIDER=anthropic),
  stepped in this process as the workers step it.

Reported per path, and per category and path: entries; adversarial `blocked` (none of the
entry's invented strings in the published summary, answer or actions) or faithful `accepted`
(audit `accepted`, no fallback); their rates; fallbacks by type; for Verifier and Executor
entries, how many ended with the outcome (status, verdict, fallback type) of the offline
Verifier and Composer on the same evidence (a Verifier entry's patch applied to the offline
Verifier's answer too: the same judgement); every leak (the string and the published text
around it) and every refused faithful reply (the check's reason). `statement_check` times
`pipeline.rules.statements.check_reply` on every Composer reply of the verify path in this process
(per reply the median of `--repeat` calls with its caches warm, and the first call after
clearing them): the check's cost per answer. `wall_time_per_entry` is the replay itself
(bundle export excluded). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.composer import ComposerInput, ComposerReply  # noqa: E402
from pipeline.rules import statements  # noqa: E402
from tests.model_replies import (  # noqa: E402
    KINDS,
    PATHS,
    Entry,
    Replay,
    Replayer,
    load_corpus,
)

TARGETS = {"adversarial_blocked": 1.0, "faithful_accepted": 0.95}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    args = _arguments()
    started = time.perf_counter()
    kinds = KINDS if args.kind == "all" else (args.kind,)
    paths = tuple(p for p in args.paths.split(",") if p)
    unknown = set(paths) - set(PATHS)
    if unknown:
        raise SystemExit(f"unknown paths: {sorted(unknown)}")
    entries = {kind: _limited(load_corpus(kind), args.per_category) for kind in kinds}
    replays: dict[str, list[Replay]] = {}
    by_id: dict[str, Entry] = {}
    with Replayer() as replayer:
        for kind, chosen in entries.items():
            log(f"{kind}: {len(chosen)} entries x {len(paths)} paths")
            for n, entry in enumerate(chosen, 1):
                by_id[entry.id] = entry
                for path in paths:
                    replays.setdefault(kind, []).append(replayer.replay(entry, path))
                if n % 25 == 0:
                    log(f"  {n}/{len(chosen)}")
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "paths": list(paths),
        "corpus": {kind: len(chosen) for kind, chosen in entries.items()},
    }
    if "adversarial" in replays:
        report["adversarial"] = _adversarial(replays["adversarial"], by_id, paths)
    if "faithful" in replays:
        report["faithful"] = _faithful(replays["faithful"], by_id, paths)
    every = [r for rs in replays.values() for r in rs]
    report["composer_inputs_differ"] = _inputs_differ(every)
    report["statement_check"] = _statement_check([r for r in every if r.path == "verify"],
                                                 repeat=args.repeat)
    report["wall_time_per_entry"] = {
        path: _timing([r.seconds for r in every if r.path == path]) for path in paths}
    report["targets"] = {**TARGETS, "met": _met(report)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, ensure_ascii=False))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("all", *KINDS), default="all")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help="comma-separated: verify, run (default both)")
    parser.add_argument("--per-category", type=int, default=0,
                        help="replay only the first N entries of each category (0: all)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="check_reply calls per Composer reply for its timing")
    return parser.parse_args()


def _limited(entries: list[Entry], per_category: int) -> list[Entry]:
    if per_category <= 0:
        return entries
    seen: Counter[str] = Counter()
    chosen = []
    for entry in entries:
        if seen[entry.category] < per_category:
            chosen.append(entry)
            seen[entry.category] += 1
    return chosen


def _figures(replays: Sequence[Replay], ok: Callable[[Replay], bool], key: str
             ) -> dict[str, Any]:
    good = sum(ok(r) for r in replays)
    offline = [r for r in replays if r.offline is not None]
    figures: dict[str, Any] = {
        "entries": len(replays), key: good,
        f"{key}_pct": round(100.0 * good / len(replays), 1) if replays else None,
        "fallbacks": dict(sorted(Counter(r.fallback_type for r in replays
                                         if r.fallback_type).items())),
    }
    if offline:
        figures["same_outcome_as_offline"] = {
            "applies": len(offline), "same": sum(bool(r.same_as_offline) for r in offline)}
    return figures


def _grouped(replays: Sequence[Replay], by_id: dict[str, Entry], paths: Sequence[str],
             ok: Callable[[Replay], bool], key: str) -> dict[str, Any]:
    categories = sorted({by_id[r.entry_id].category for r in replays})
    return {
        "by_path": {p: _figures([r for r in replays if r.path == p], ok, key) for p in paths},
        "by_category": {c: {p: _figures([r for r in replays if r.path == p
                                          and by_id[r.entry_id].category == c], ok, key)
                            for p in paths} for c in categories},
        "by_role": {role: {p: _figures([r for r in replays if r.path == p
                                        and by_id[r.entry_id].role == role], ok, key)
                           for p in paths}
                    for role in sorted({by_id[r.entry_id].role for r in replays})},
    }


def _adversarial(replays: list[Replay], by_id: dict[str, Entry], paths: Sequence[str]
                 ) -> dict[str, Any]:
    result = _grouped(replays, by_id, paths, lambda r: not r.leaked, "blocked")
    result["leaks"] = [
        {"entry": r.entry_id, "category": by_id[r.entry_id].category,
         "role": by_id[r.entry_id].role, "path": r.path, "invented": s, "around": r.around(s),
         "outcome": list(r.outcome)}
        for r in replays for s in r.leaked]
    return result


def _faithful(replays: list[Replay], by_id: dict[str, Entry], paths: Sequence[str]
              ) -> dict[str, Any]:
    result = _grouped(replays, by_id, paths, lambda r: r.accepted, "accepted")
    result["refused"] = [
        {"entry": r.entry_id, "category": by_id[r.entry_id].category, "path": r.path,
         "stale": r.stale, "fallback_type": r.fallback_type,
         "refused": [{"text": x["text"], "reason": x["reason"]} for x in r.refusals]}
        for r in replays if not r.accepted]
    result["stale"] = sorted({r.entry_id for r in replays if r.stale})
    return result


def _inputs_differ(replays: Sequence[Replay]) -> list[str]:
    """Entries whose Composer input differs between the two paths (first call of each)."""
    first: dict[str, dict[str, str]] = {}
    for r in replays:
        if r.composer_calls:
            first.setdefault(r.entry_id, {})[r.path] = r.composer_calls[0][0]
    return sorted(e for e, by_path in first.items()
                  if len(by_path) == 2 and len(set(by_path.values())) == 2)


def _clear_caches() -> None:
    for name in ("_vocabulary", "_norm"):
        clear = getattr(getattr(statements, name, None), "cache_clear", None)
        if clear is not None:
            clear()


def _statement_check(replays: Sequence[Replay], *, repeat: int) -> dict[str, Any]:
    warm: list[float] = []
    cold: list[float] = []
    sizes: list[int] = []
    for replay in replays:
        for composer_input, answer in replay.composer_calls:
            try:
                reply = ComposerReply.model_validate(answer)
            except ValueError:  # not the contract's shape: the check never runs on it
                continue
            ci = ComposerInput.model_validate_json(composer_input)
            sizes.append(len(reply.answer_summary) + len(reply.user_facing_answer)
                         + len(reply.recommended_actions))
            _clear_caches()
            t0 = time.perf_counter()
            statements.check_reply(reply, ci)
            cold.append(time.perf_counter() - t0)
            runs = []
            for _ in range(max(1, repeat)):
                t0 = time.perf_counter()
                statements.check_reply(reply, ci)
                runs.append(time.perf_counter() - t0)
            warm.append(statistics.median(runs))
    return {"replies": len(warm), "repeat": repeat,
            "statements_per_reply_median": statistics.median(sizes) if sizes else None,
            "warm": _timing(warm), "cold": _timing(cold)}


def _timing(seconds: Sequence[float]) -> dict[str, Any]:
    if not seconds:
        return {"n": 0}
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"n": len(ordered), "median_ms": round(1000 * statistics.median(ordered), 3),
            "p95_ms": round(1000 * p95, 3), "max_ms": round(1000 * ordered[-1], 3),
            "total_s": round(sum(ordered), 2)}


def _met(report: dict[str, Any]) -> bool:
    blocked = [f["blocked_pct"] for f in report.get("adversarial", {})
               .get("by_path", {}).values()]
    accepted = [f["accepted_pct"] for f in report.get("faithful", {})
                .get("by_path", {}).values()]
    return (all(b == 100 * TARGETS["adversarial_blocked"] for b in blocked)
            and all(a >= 100 * TARGETS["faithful_accepted"] for a in accepted))


if __name__ == "__main__":
    main()
