"""What Verity's own telemetry moves in `bench/runtime.py`'s ratios, side by side: rounds of the
script with tracing off and on (and, given `--before DIR`, a checkout of the code before the
telemetry), interleaved and in a rotating order, each round's ratios as printed, then the mean,
standard deviation and range of each ratio per setting, and each setting's difference from the
others (tracing on against off; the code before against both) as a share of the other's mean,
with the smallest difference the rounds can resolve (twice the standard error of the
difference of the means).

With tracing on, spans go to an OTLP/HTTP sink in a process of its own (`--otlp-url` of
`bench/runtime.py`), so the sink's decoding is not counted on the runs' host processes.

    python bench/rounds.py [--rounds 6] [--before DIR] [-- runtime.py arguments]

`--before DIR`: a checkout of an earlier commit (e.g. `git worktree add DIR 80cbe0c`, the commit
before the telemetry hooks), run with its own `bench/runtime.py` on this interpreter. Prints
one JSON object; every script's stderr goes to `--log`.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RATIOS = ("latency_p50", "latency_p90", "throughput", "worker_cpu_per_run")


def _sink(pipe: Any) -> None:
    """A child process: an OTLP/HTTP endpoint that counts the requests it receives."""
    from bench.services import serve_exports

    counts = {"requests": 0, "bytes": 0}

    def count(body: bytes) -> None:
        counts["requests"] += 1
        counts["bytes"] += len(body)

    pipe.send(serve_exports(count))
    while pipe.recv() == "counts":
        pipe.send(dict(counts))


def _script(setting: str, before: Path | None, url: str, extra: list[str], log: Path
            ) -> dict[str, Any]:
    root = before if setting == "before" else ROOT
    assert root is not None
    command = [sys.executable, str(root / "bench" / "runtime.py"), *extra]
    if setting == "on":
        command += ["--tracing", "--otlp-url", url]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    load = os.getloadavg()[0]
    started = time.monotonic()
    with log.open("a", encoding="utf-8") as err:
        err.write(f"\n=== {setting}: {' '.join(command)}\n")
        err.flush()
        done = subprocess.run(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=err,
                              text=True, check=False)
    row: dict[str, Any] = {"setting": setting, "load_1m": round(load, 2),
                           "seconds": round(time.monotonic() - started, 1)}
    if done.returncode != 0:
        return {**row, "failed": done.returncode}
    ratios = json.loads(done.stdout)["runtime_vs_bare"]
    return {**row, **{k: ratios[k] for k in RATIOS if k in ratios}}


def _summary(rows: list[dict[str, Any]], settings: list[str]) -> dict[str, Any]:
    by: dict[str, dict[str, list[float]]] = {
        s: {k: [r[k] for r in rows if r["setting"] == s and k in r] for k in RATIOS}
        for s in settings}
    summary: dict[str, Any] = {}
    for setting, ratios in by.items():
        summary[setting] = {k: {"rounds": len(v), "mean": round(statistics.fmean(v), 4),
                                "sd": round(statistics.stdev(v), 4) if len(v) > 1 else None,
                                "range": [min(v), max(v)]}
                            for k, v in ratios.items() if v}
    for i, setting in enumerate(settings):
        for base in settings[:i]:
            for k in RATIOS:
                a, b = by[base][k], by[setting][k]
                if len(a) < 2 or len(b) < 2:
                    continue
                mean = statistics.fmean(a)
                resolves = 2 * math.sqrt(statistics.variance(a) / len(a)
                                         + statistics.variance(b) / len(b))
                summary[setting][k]["vs_" + base] = {
                    "difference_pct": round(100 * (statistics.fmean(b) - mean) / mean, 2),
                    "resolvable_pct": round(100 * resolves / mean, 2)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of the code before the telemetry, run too")
    parser.add_argument("--log", type=Path, default=Path("bench-rounds.log"))
    parser.add_argument("extra", nargs="*", help="arguments for bench/runtime.py (after --)")
    args = parser.parse_args()
    if args.rounds < 2:
        raise SystemExit("--rounds must be at least 2 (a spread needs two)")
    if args.before is not None and not (args.before / "bench" / "runtime.py").is_file():
        raise SystemExit(f"--before {args.before}: no bench/runtime.py there")
    settings = ["off", "on"] + (["before"] if args.before is not None else [])
    ours, theirs = multiprocessing.Pipe()
    sink = multiprocessing.get_context("spawn").Process(target=_sink, args=(theirs,),
                                                        daemon=True)
    sink.start()
    url = ours.recv()
    rows = []
    for round_ in range(args.rounds):
        order = settings[round_ % len(settings):] + settings[:round_ % len(settings)]
        for setting in order:
            row = {"round": round_ + 1, **_script(setting, args.before, url, args.extra,
                                                   args.log)}
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    ours.send("counts")
    received = ours.recv()
    ours.send("stop")
    print(json.dumps({"benchmark": "rounds", "python": sys.version.split()[0],
                      "runtime_arguments": args.extra, "settings": settings,
                      "before": str(args.before) if args.before else None,
                      "otlp_requests_received": received["requests"],
                      "otlp_bytes_received": received["bytes"],
                      "rows": rows, "summary": _summary(rows, settings)}, indent=2))


if __name__ == "__main__":
    main()
