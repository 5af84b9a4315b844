"""What tracing moves in `bench/runtime.py`'s ratios, side by side in one worker: traced and
untraced runs at the same moment, instead of whole scripts minutes apart.

The worker (threads pool, the instant runtime of `bench/runtime.py`) runs with tracing on and
`OTEL_TRACES_SAMPLER=traceidratio` at 0.5, exporting to an OTLP/HTTP sink in a process of its
own that decodes and counts the spans. The sampler decides from the run id (`tracing.traced`),
so this script picks each run's id to be traced or not, and runs, interleaved (the traced and
the untraced run second in turn):
- latency: a bare canvas, a traced run, an untraced run, one after the other, `--runs` times;
- throughput: a batch of bare canvases, of traced runs and of untraced runs, `--rounds` times,
  with the worker's CPU over each batch (the batch processor exports every
  `OTEL_BSP_SCHEDULE_DELAY`=1000 ms here, and each batch waits `--settle` s after its last run
  before the CPU is read, so a batch's spans are exported during its own window; under load a
  worker with the default 5 s delay exports a full batch of 512 spans about every 2 s).
Each kind's ratio against the bare canvas is `bench/runtime.py`'s ratio; tracing's move is the
traced ratio against the untraced one, per block of latency samples and per throughput round,
with its mean and the smallest move the blocks resolve (twice the standard error).

An untraced run here pays what a run pays with tracing off plus one sampling check per hook
(a digest of the run id, cached, and a comparison), timed in this process (`sampled_out_check`);
and it shares the host with the export thread, so the move is tracing's cost on the run's own
path; the export thread's CPU is in the worker CPU figures.

    python bench/paired.py [--runs 320] [--batch 40] [--rounds 24] [--concurrency 8]
    python bench/paired.py --pool A.json B.json ...

`--pool` reads earlier outputs of this script and prints each move pooled over them (the mean
weighted by the inverse of each output's variance, and twice the pooled standard error).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runtime import (  # noqa: E402
    close_client,
    ratio,
    run_figures,
    throughput_bare,
    throughput_of,
)
from bench.services import REDIS, Worker, log, scratch_database  # noqa: E402
from bench.telemetry import span_sink  # noqa: E402

KINDS = ("bare", "traced", "untraced")
BLOCK = 16
"""Latency samples per block (even: both orders alike): each block gives one traced-against-
untraced ratio."""


def main() -> None:
    args = _arguments()
    if args.pool:
        print(json.dumps(_pooled(args.pool), indent=2))
        return
    ours, theirs = multiprocessing.Pipe()
    sink = multiprocessing.get_context("spawn").Process(target=span_sink, args=(theirs,),
                                                        daemon=True)
    sink.start()
    url = ours.recv()
    with scratch_database() as db_url:
        os.environ.update({
            "VERITY_BROKER_URL": REDIS, "VERITY_DATABASE_URL": db_url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_TRACES_SAMPLER": "traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.5", "OTEL_BSP_SCHEDULE_DELAY": "1000"})
        os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        load_before = os.getloadavg()
        with Worker([("control,llm,tools", args.concurrency)],
                    factory="bench.instant:build_runtime") as worker:
            report = _measure(args, worker)
        report["load_average_1_5_15"] = {"before": [round(x, 2) for x in load_before],
                                         "after": [round(x, 2) for x in os.getloadavg()]}
    time.sleep(1.0)  # the worker's last export
    ours.send("counts")
    received = ours.recv()
    report["otlp"] = {"requests_received": received["requests"],
                      "spans_received": received["spans"],
                      "traced_runs_submitted": report["otlp_traced_runs_submitted"],
                      "spans_per_traced_run": round(
                          received["spans"] / max(report.pop("otlp_traced_runs_submitted"), 1),
                          2)}
    print(json.dumps(report, indent=2))
    close_client()


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=320, help="latency samples per kind")
    parser.add_argument("--batch", type=int, default=40, help="runs submitted at once")
    parser.add_argument("--rounds", type=int, default=24, help="throughput batches per kind")
    parser.add_argument("--concurrency", type=int, default=8, help="worker threads")
    parser.add_argument("--settle", type=float, default=1.2,
                        help="seconds after a batch before its CPU is read")
    parser.add_argument("--pool", nargs="+", type=Path, default=None,
                        help="pool the moves of these earlier outputs instead of measuring")
    args = parser.parse_args()
    if args.pool:
        return args
    if args.runs < 2 * BLOCK or args.rounds < 4 or args.rounds % 2 or args.batch < 1:
        raise SystemExit(f"--runs must be at least {2 * BLOCK}, --rounds an even number from 4 "
                         "and --batch at least 1 (a spread needs two blocks, two pairs of rounds)")
    return args


class Runs:
    """Instant runs whose ids the tracing sampler keeps (`traced`) or drops (`untraced`)."""

    def __init__(self) -> None:
        from bench.instant import build_runtime
        from pipeline.config import VeritySettings
        from pipeline.telemetry import tracing
        from tasks.producer import send_run

        self.runtime = build_runtime(VeritySettings())
        self._traced = tracing.traced
        self._send = send_run
        self.traced_submitted = 0

    def run_id(self, kind: str) -> str:
        while True:
            run_id = uuid.uuid4().hex
            if (self._traced(run_id) is not None) == (kind == "traced"):
                return run_id

    def submit(self, kind: str) -> str:
        run_id = self.runtime.submit("bench", tenant_id="bench", run_id=self.run_id(kind))
        self._send(run_id)
        self.traced_submitted += kind == "traced"
        return run_id

    def latency(self, kind: str) -> float:
        start = time.time()
        run_id = self.submit(kind)
        record = self.runtime.store.get_run(run_id, tenant_id="bench")
        deadline = time.monotonic() + 60
        while record.finished_at is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run_id} did not finish in 60 s")
            time.sleep(0.02)
            record = self.runtime.store.get_run(run_id, tenant_id="bench")
        assert record.status.value == "SUCCESS", record.status
        return record.finished_at.timestamp() - start

    def throughput(self, kind: str, batch: int) -> float:
        return throughput_of(lambda: self.submit(kind), batch)


def _measure(args: argparse.Namespace, worker: Worker) -> dict[str, Any]:
    from bench.bare_tasks import canvas
    from bench.instant import TOOL_CALLS

    runs = Runs()

    def bare_latency() -> float:
        start = time.time()
        return float(canvas(TOOL_CALLS).apply_async().get(timeout=60)) - start

    def one(kind: str) -> float:
        return bare_latency() if kind == "bare" else runs.latency(kind)

    for _ in range(3):  # warm every path
        for kind in KINDS:
            one(kind)
    latency: dict[str, list[float]] = {k: [] for k in KINDS}
    for i in range(args.runs):
        for kind in _ordered(i):
            latency[kind].append(one(kind))
    log("latency p50: " + ", ".join(f"{k} {statistics.median(v):.4f}s"
                                    for k, v in latency.items()))
    throughput: dict[str, list[float]] = {k: [] for k in KINDS}
    cpu: dict[str, list[float]] = {k: [] for k in KINDS}
    for round_ in range(args.rounds):
        for kind in _ordered(round_):
            before = worker.cpu_seconds()
            throughput[kind].append(
                throughput_bare(args.batch, canvas, TOOL_CALLS) if kind == "bare"
                else runs.throughput(kind, args.batch))
            time.sleep(args.settle)
            cpu[kind].append((worker.cpu_seconds() - before) / args.batch)
        log(f"round {round_ + 1}: " + ", ".join(
            f"{k} {throughput[k][-1]:.1f} runs/s {1000 * cpu[k][-1]:.1f} ms CPU" for k in KINDS))
    runs.runtime.store.close()
    figures = {k: run_figures(latency[k], throughput[k],
                           cpu_s_per_run=statistics.fmean(cpu[k])) for k in KINDS}
    return {
        "benchmark": "paired", "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
        "worker": {"pool": "threads", "concurrency": args.concurrency, "broker": "redis",
                   "database": "postgresql", "tasks_per_run": 9 + TOOL_CALLS,
                   "sampler": "traceidratio 0.5", "settle_s": args.settle},
        "bare_canvas": figures["bare"], "traced_runs": figures["traced"],
        "untraced_runs": figures["untraced"],
        "runtime_vs_bare": {kind: _ratios(figures[kind], figures["bare"])
                            for kind in ("traced", "untraced")},
        "tracing_moves_the_ratio": _moves(latency, throughput, cpu),
        "sampled_out_check": _sampled_out_check(runs),
        "otlp_traced_runs_submitted": runs.traced_submitted,
    }


def _ordered(i: int) -> tuple[str, ...]:
    """The kinds in the order of sample or round `i`: the bare canvas first, then the traced
    and the untraced run each second in turn, so that a pair of samples cancels whatever the
    place in the order does (a round's second batch was faster than its third by up to 15%)."""
    return KINDS if i % 2 == 0 else ("bare", "untraced", "traced")


def _ratios(kind: dict[str, Any], bare: dict[str, Any]) -> dict[str, float]:
    return {
        "latency_p50": ratio(kind["latency_s"]["p50"], bare["latency_s"]["p50"]),
        "latency_p90": ratio(kind["latency_s"]["p90"], bare["latency_s"]["p90"]),
        "throughput": ratio(kind["throughput_runs_per_s"], bare["throughput_runs_per_s"]),
        "worker_cpu_per_run": ratio(kind["worker_cpu_ms_per_run"],
                                     bare["worker_cpu_ms_per_run"]),
    }


def _moves(latency: dict[str, list[float]], throughput: dict[str, list[float]],
           cpu: dict[str, list[float]]) -> dict[str, Any]:
    """Traced against untraced, as a percentage: the latency medians of each block of `BLOCK`
    samples, the throughput and the CPU of each round; each move's mean over the blocks or
    rounds, and the smallest move they resolve. The bare canvas is the same for both, so this
    is how far tracing moves the ratio against it."""
    blocks = len(latency["traced"]) // BLOCK

    def block(kind: str, b: int) -> float:
        return statistics.median(latency[kind][b * BLOCK:(b + 1) * BLOCK])

    return {
        "latency_p50_pct": _spread([block("traced", b) / block("untraced", b) for b in
                                    range(blocks)], unit="blocks"),
        "throughput_pct": _spread(_paired(throughput), unit="pairs of rounds"),
        "worker_cpu_per_run_pct": _spread(_paired(cpu), unit="pairs of rounds"),
        "whole_latency_p50_pct": round(100 * (statistics.median(latency["traced"])
                                              / statistics.median(latency["untraced"]) - 1), 2),
    }


def _paired(values: dict[str, list[float]]) -> list[float]:
    """Traced against untraced per pair of rounds (one in each order): the geometric mean of
    the two rounds' ratios."""
    ratios = [t / u for t, u in zip(values["traced"], values["untraced"], strict=True)]
    return [math.sqrt(a * b) for a, b in zip(ratios[::2], ratios[1::2], strict=False)]


def _spread(ratios: list[float], *, unit: str) -> dict[str, Any]:
    mean = statistics.fmean(ratios)
    return {unit: len(ratios), "mean": round(100 * (mean - 1), 2),
            "sd": round(100 * statistics.stdev(ratios), 2),
            "resolvable": round(200 * statistics.stdev(ratios) / math.sqrt(len(ratios)), 2),
            "each": [round(100 * (r - 1), 1) for r in ratios]}


def _pooled(paths: list[Path]) -> dict[str, Any]:
    """Each move over several outputs: their means weighted by the inverse of their variance
    (the square of half the smallest move each resolves), and twice the pooled standard
    error. An output read per round rather than per pair of rounds (this script before the
    traced and untraced runs took the second place in turn) is refused."""
    moves: dict[str, list[tuple[float, float]]] = {}
    loads = []
    for path in paths:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            measured = report["tracing_moves_the_ratio"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"--pool {path}: not an output of this script ({exc})") from None
        if "pairs of rounds" not in measured.get("throughput_pct", {}):
            raise SystemExit(f"--pool {path}: read per round, not per pair of rounds")
        loads.append(report.get("load_average_1_5_15"))
        for name, move in measured.items():
            if isinstance(move, dict):
                moves.setdefault(name, []).append((move["mean"], move["resolvable"] / 2))
    pooled = {}
    for name, values in moves.items():
        weights = [1 / (se * se) if se > 0 else 0.0 for _, se in values]
        if not sum(weights):
            continue
        mean = sum(w * m for w, (m, _) in zip(weights, values, strict=True)) / sum(weights)
        pooled[name] = {"outputs": len(values), "mean": round(mean, 2),
                        "resolvable": round(2 / math.sqrt(sum(weights)), 2),
                        "each": [m for m, _ in values]}
    return {"benchmark": "paired", "pooled": [str(p) for p in paths], "load_average_1_5_15":
            loads, "tracing_moves_the_ratio": pooled}


def _sampled_out_check(runs: Runs) -> dict[str, Any]:
    """What a hook's sampling decision costs an untraced run, in this process (µs)."""
    run_id = runs.run_id("untraced")
    seconds = min(timeit.repeat(lambda: runs._traced(run_id), number=20000, repeat=5)) / 20000
    return {"per_hook_us": round(seconds * 1e6, 3)}


if __name__ == "__main__":
    main()
