"""Gatekeeper and `verify_bundle` throughput, printed as one JSON object on stdout.

    python bench/gatekeeper.py [--claims 1000] [--repeat 7] [--min-time 0.2] [--fail-ratio 0.1]
                               [--cpu 0 | --no-pin]

Builds run bundles scaled up from the shipped samples (`samples/bundles/*.json`): every claim of
a sample that verifies to SUCCESS and whose claim check is a direct observation or a reasonable
inference is replicated, under a fresh claim id, with its passed bindings (the sample's real
invocations, paths and matched texts), until there are `--claims` claims. A second variant
corrupts about `--fail-ratio` of the bindings (fabricated invocation, tool-name mismatch,
unresolvable path, absent matched text, in turn).

Measures, on one pinned core when the platform allows it:
- `gatekeeper`: `pipeline.rules.gatekeeper.gatekeep(document, invocations)` on each scaled variant,
  as bindings checked per second (median over `--repeat` repetitions), beside a trivial
  baseline over the same bindings (dict lookup + `in` substring check) run in the same process;
  `ratio_to_baseline` is comparable across machines.
- `verify_bundle`: bundles verified per second with the offline Verifier and Composer, on each
  shipped sample and on the scaled bundle.

Progress goes to stderr; stdout is exactly one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.bundle import RunBundle  # noqa: E402
from models.invocation import ToolInvocation  # noqa: E402
from pipeline.agents.offline_verifier import OfflineVerifier  # noqa: E402
from pipeline.agents.template_composer import TemplateComposer  # noqa: E402
from pipeline.rules.gatekeeper import gatekeep  # noqa: E402
from pipeline.rules.jsonpath import resolve  # noqa: E402
from pipeline.rules.text import normalize, value_text  # noqa: E402
from pipeline.verification import load_bundle, verify_bundle  # noqa: E402

SAMPLES = ROOT / "samples" / "bundles"
TARGET_BINDINGS_PER_S = 50_000
_SUPPORTED = frozenset({"direct_observation", "reasonable_inference"})


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pin_to_one_core(cpu: int = 0) -> int | None:
    """Pin this process to `cpu` (or the first CPU it may use); None when the platform cannot."""
    if not hasattr(os, "sched_setaffinity") or not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if cpu not in allowed:
        cpu = allowed[0]
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None
    return cpu


# ---------------------------------------------------------------------------------------------
# Scaled bundles


def load_samples() -> dict[str, RunBundle]:
    """Every shipped sample bundle, by file name."""
    return {
        path.name: load_bundle(path.read_text(encoding="utf-8"))
        for path in sorted(SAMPLES.glob("*.json"))
    }


def _usable_claims(bundle: RunBundle) -> list[dict[str, Any]]:
    """The sample's claims that verify cleanly, each with only its passed bindings."""
    result = verify_bundle(bundle, verifier=OfflineVerifier(), composer=TemplateComposer()).result
    evaluation = result.self_evaluation.verifier_evaluation
    if result.status != "SUCCESS" or evaluation.gatekeeper_result is None:
        return []
    supported = {c.claim_id for c in evaluation.claim_checks if c.verification in _SUPPORTED}
    passed = {(b.claim_id, b.index) for b in evaluation.gatekeeper_result.checked_bindings
              if b.status == "pass"}
    document = json.loads(bundle.executor_output_raw)
    claims: list[dict[str, Any]] = []
    for claim in document["claims"]:
        if claim["claim_id"] not in supported:
            continue
        bindings = [b for i, b in enumerate(claim["evidence_bindings"])
                    if (claim["claim_id"], i) in passed]
        claims.append({**claim, "evidence_bindings": bindings})
    return claims


def build_scaled(samples: Mapping[str, RunBundle], claims: int) -> tuple[RunBundle, list[str]]:
    """One valid bundle of `claims` claims replicated from the samples; and the samples used."""
    pool: list[dict[str, Any]] = []
    invocations: dict[str, ToolInvocation] = {}
    used: list[str] = []
    missing_info: list[str] = []
    for name, bundle in samples.items():
        usable = _usable_claims(bundle)
        if not usable:
            continue
        used.append(name)
        pool.extend(usable)
        cited = {b["invocation_id"] for c in usable for b in c["evidence_bindings"]}
        for invocation in bundle.invocations:
            if invocation.tool_call_id in cited:
                invocations.setdefault(invocation.tool_call_id, invocation)
        missing_info.extend(json.loads(bundle.executor_output_raw).get("missing_info", []))
    if not pool:
        raise SystemExit("no shipped sample verifies to SUCCESS: nothing to scale up")
    replicated = [
        {**pool[i % len(pool)], "claim_id": f"c{i + 1}"} for i in range(claims)
    ]
    document = {"claims": replicated, "hypotheses": [], "missing_info": missing_info,
                "recommended_actions": []}
    base = samples.get("pass.json") or samples[used[0]]
    bundle = base.model_copy(update={
        "run_id": f"bench-scaled-{claims}",
        "invocations": list(invocations.values()),
        "executor_output_raw": json.dumps(document),
    })
    return bundle, used


def with_failures(bundle: RunBundle, ratio: float) -> tuple[RunBundle, int]:
    """The bundle with about `ratio` of its bindings made invalid, each in a different way."""
    document = json.loads(bundle.executor_output_raw)
    step = max(1, round(1 / ratio)) if ratio > 0 else 0
    failing = 0
    position = 0
    for claim in document["claims"]:
        bindings = []
        for binding in claim["evidence_bindings"]:
            position += 1
            if step and position % step == 0:
                binding = _corrupt(binding, failing)
                failing += 1
            bindings.append(binding)
        claim["evidence_bindings"] = bindings
    corrupted = bundle.model_copy(update={
        "run_id": f"{bundle.run_id}-failing",
        "executor_output_raw": json.dumps(document),
    })
    return corrupted, failing


def _corrupt(binding: dict[str, Any], n: int) -> dict[str, Any]:
    kind = n % 4
    if kind == 0:
        return {**binding, "invocation_id": f"toolu_01Fabricated{n:08d}"}
    if kind == 1:
        return {**binding, "tool_name": "get_deployments"}
    if kind == 2:
        return {**binding, "path": binding["path"] + "[99]"}
    return {**binding, "matched_text": binding["matched_text"] + " (not in the evidence)"}


def _bindings(document: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (b["invocation_id"], b["path"], b["matched_text"])
        for claim in document["claims"] for b in claim["evidence_bindings"]
    ]


# ---------------------------------------------------------------------------------------------
# Timing


def measure(fn: Callable[[], object], *, repeat: int, min_time: float) -> list[float]:
    """Seconds per call, once per repetition; each repetition loops for at least `min_time`."""
    fn()  # warm caches and imports outside the timed runs
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-9)
    number = max(1, int(min_time / once))
    runs: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - start) / number)
    return runs


def _rate(runs: Sequence[float], items: int) -> dict[str, Any]:
    median = statistics.median(runs)
    return {
        "per_s": round(items / median, 1),
        "median_s": median,
        "min_s": min(runs),
        "max_s": max(runs),
    }


def baseline_check(
    projections: Mapping[str, Any], bindings: Sequence[tuple[str, str, str]]
) -> Callable[[], int]:
    """The trivial check the Gatekeeper is compared with: a dict lookup and an `in` test.

    Values at each path are resolved and normalized up front, so only the lookups and the
    substring tests are timed.
    """
    values: dict[tuple[str, str], str] = {}
    for invocation_id, path, _ in bindings:
        document = projections.get(invocation_id)
        try:
            text = normalize(value_text(resolve(document, path))) if document else ""
        except ValueError:
            text = ""
        values[(invocation_id, path)] = text

    def run() -> int:
        passed = 0
        for invocation_id, path, matched_text in bindings:
            text = values.get((invocation_id, path))
            if text is not None and matched_text in text:
                passed += 1
        return passed

    return run


def bench_gatekeeper(
    bundle: RunBundle, *, repeat: int, min_time: float, failing: int
) -> dict[str, Any]:
    """Bindings per second of `gatekeep`, and of the baseline over the same bindings."""
    document = json.loads(bundle.executor_output_raw)
    invocations = bundle.invocations
    outcome = gatekeep(document, invocations)
    bindings = _bindings(document)
    checked = len(outcome.result.checked_bindings)
    assert checked == len(bindings)
    passed = sum(1 for b in outcome.result.checked_bindings if b.status == "pass")
    runs = measure(lambda: gatekeep(document, invocations), repeat=repeat, min_time=min_time)
    projections = {
        inv.tool_call_id: inv.projection.model_dump(mode="json")
        for inv in invocations if inv.projection is not None
    }
    base_runs = measure(baseline_check(projections, bindings), repeat=repeat, min_time=min_time)
    rate = _rate(runs, checked)
    base = _rate(base_runs, checked)
    return {
        "claims": len(document["claims"]),
        "bindings": checked,
        "failing_bindings": checked - passed,
        "injected_failures": failing,
        "severity": outcome.result.severity.value,
        "failed_rules": [r.value for r in outcome.result.failed_rules],
        "bindings_per_s": rate["per_s"],
        "calls_per_s": round(1 / rate["median_s"], 2),
        "seconds_per_call": {k: rate[k] for k in ("median_s", "min_s", "max_s")},
        "baseline_bindings_per_s": base["per_s"],
        "ratio_to_baseline": round(rate["per_s"] / base["per_s"], 5),
        "meets_target": rate["per_s"] >= TARGET_BINDINGS_PER_S,
    }


def bench_verify(bundle: RunBundle, *, repeat: int, min_time: float) -> dict[str, Any]:
    """Bundles per second of `verify_bundle` with the offline agents."""
    verifier, composer = OfflineVerifier(), TemplateComposer()
    result = verify_bundle(bundle, verifier=verifier, composer=composer).result
    runs = measure(
        lambda: verify_bundle(bundle, verifier=verifier, composer=composer),
        repeat=repeat, min_time=min_time,
    )
    rate = _rate(runs, 1)
    return {
        "status": result.status,
        "verdict": result.verdict.value if result.verdict else None,
        "fallback_type": result.fallback_type.value if result.fallback_type else None,
        "bundles_per_s": rate["per_s"],
        "seconds_per_bundle": {k: rate[k] for k in ("median_s", "min_s", "max_s")},
    }


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=1000, help="claims in the scaled bundle")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions; the median is kept")
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="seconds each repetition loops for, at least (one call minimum)")
    parser.add_argument("--fail-ratio", type=float, default=0.1,
                        help="share of bindings made invalid in the failing variant")
    parser.add_argument("--cpu", type=int, default=0, help="CPU to pin to (default 0)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin to one core")
    args = parser.parse_args(argv)
    if args.claims < 1 or args.repeat < 1 or args.min_time < 0 or not 0 < args.fail_ratio < 1:
        parser.error("--claims and --repeat must be positive, --fail-ratio in (0, 1)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    pinned = None if args.no_pin else pin_to_one_core(args.cpu)
    _log(f"pinned to cpu {pinned}" if pinned is not None else "not pinned")
    samples = load_samples()
    scaled, used = build_scaled(samples, args.claims)
    failing_bundle, injected = with_failures(scaled, args.fail_ratio)
    timing = {"repeat": args.repeat, "min_time": args.min_time}

    _log(f"gatekeeper: {args.claims} claims, valid")
    valid = bench_gatekeeper(scaled, failing=0, **timing)
    _log(f"gatekeeper: {args.claims} claims, ~{args.fail_ratio:.0%} failing")
    failing = bench_gatekeeper(failing_bundle, failing=injected, **timing)

    verify: dict[str, Any] = {}
    for name, bundle in samples.items():
        _log(f"verify_bundle: {name}")
        verify[name] = bench_verify(bundle, **timing)
    _log(f"verify_bundle: scaled ({args.claims} claims)")
    verify[f"scaled_{args.claims}_claims"] = bench_verify(scaled, **timing)

    report = {
        "benchmark": "gatekeeper",
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "pinned": pinned is not None,
        "pinned_cpu": pinned,
        "repeat": args.repeat,
        "min_time_s": args.min_time,
        "claims": args.claims,
        "scaled_from": used,
        "target_bindings_per_s": TARGET_BINDINGS_PER_S,
        "gatekeeper": {"valid": valid, "failing": failing},
        "verify_bundle": verify,
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
