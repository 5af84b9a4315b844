"""Runtime benchmark: Verity's Celery runtime against a bare Celery canvas, side by side.

One worker process (threads pool) on the local Redis and PostgreSQL runs, interleaved:
- the bare canvas: no-op tasks in the same shape and number as one run;
- instant runs: the real runtime (coordinator, store persistence, tool chord) with node bodies
  that return at once (bench/instant.py);
then, with the same worker settings, full offline runs on a shipped scenario, and 200 runs in
flight for the worker's peak memory. Prints one JSON object; with the wall-clock figures, the
worker's CPU time per run over the throughput batches (`worker_cpu_ms_per_run`).

    python bench/runtime.py [--runs 30] [--batch 40] [--inflight 200] [--concurrency 8]
                            [--reconciler reconcile|beat|none] [--tracing]

`--tracing` turns Verity's own tracing on in every process (OTEL_EXPORTER_OTLP_ENDPOINT at a
local OTLP/HTTP sink in this process, which counts what it receives): run the script with and
without it to see what tracing costs. Metrics are always on.

A reconciler runs beside the workers throughout (default a `verity reconcile` process at its
default interval; `--reconciler beat` embeds beat in the worker as `verity worker --beat`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.services import (  # noqa: E402
    RECONCILERS,
    REDIS,
    Reconciler,
    Worker,
    log,
    scratch_database,
    serve_exports,
)

SCENARIO = "checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"


def main() -> None:
    args = _arguments()
    sink = TraceSink() if args.tracing and not args.otlp_url else None
    with scratch_database() as db_url:
        os.environ.update({"VERITY_BROKER_URL": REDIS, "VERITY_DATABASE_URL": db_url})
        if args.tracing:
            os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otlp_url or sink.url  # type: ignore[union-attr]
        else:
            os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
            os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        report = _run(args, db_url)
    report["tracing"] = {"on": args.tracing, "otlp_url": args.otlp_url,
                         "otlp_requests_received": sink.requests if sink else 0}
    print(json.dumps(report, indent=2))
    close_client()


class TraceSink:
    """An OTLP/HTTP endpoint in this process that answers 200 to every export and counts them."""

    def __init__(self) -> None:
        self.requests = 0
        self.url = serve_exports(self._count)

    def _count(self, _body: bytes) -> None:
        self.requests += 1


def close_client() -> None:
    """Exit without running Celery's AsyncResult finalizers at interpreter shutdown (they
    try to reach Redis after the import system is gone and print a traceback)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="sequential runs per kind")
    parser.add_argument("--batch", type=int, default=40, help="runs submitted at once")
    parser.add_argument("--inflight", type=int, default=200, help="runs in flight for memory")
    parser.add_argument("--rounds", type=int, default=4,
                        help="throughput batches per kind, interleaved")
    parser.add_argument("--concurrency", type=int, default=8, help="worker threads")
    parser.add_argument("--otlp-url", default=None,
                        help="with --tracing: export to this OTLP/HTTP endpoint (a collector in "
                        "another process) instead of the sink inside this timing process")
    parser.add_argument("--tracing", action="store_true",
                        help="export every process's spans over OTLP/HTTP to a local sink")
    parser.add_argument("--reconciler", choices=RECONCILERS, default="reconcile",
                        help="the reconciler beside the worker: a `verity reconcile` process "
                             "(default), beat embedded in the worker (`verity worker --beat`), "
                             "or none")
    return parser.parse_args()


def _run(args: argparse.Namespace, db_url: str) -> dict[str, Any]:
    from bench.instant import TOOL_CALLS

    settings = {"pool": "threads", "concurrency": args.concurrency, "broker": "redis",
                "database": "postgresql", "tasks_per_run": 9 + TOOL_CALLS}
    every_queue = [("control,llm,tools", args.concurrency)]
    beat = args.reconciler == "beat"
    load_before = os.getloadavg()
    with Reconciler(args.reconciler) as reconciler:
        with Worker(every_queue, factory="bench.instant:build_runtime", beat=beat) as worker:
            reconciler.worker = worker
            bare, instant = _compare(args, worker)
            reconciler_compare = reconciler.report()
            load_compared = os.getloadavg()
        with Worker(every_queue, factory=None, beat=beat) as worker:
            reconciler.worker = worker
            offline = _offline(args)
            memory = _memory(worker, args.inflight)
            reconciler_after = reconciler.report()
    reconciler_figures = _reconciler_figures(reconciler_compare, reconciler_after)
    ratios = {
        "latency_p50": ratio(instant["latency_s"]["p50"], bare["latency_s"]["p50"]),
        "latency_p90": ratio(instant["latency_s"]["p90"], bare["latency_s"]["p90"]),
        "throughput": ratio(instant["throughput_runs_per_s"], bare["throughput_runs_per_s"]),
        "worker_cpu_per_run": ratio(instant["worker_cpu_ms_per_run"],
                                     bare["worker_cpu_ms_per_run"]),
    }
    return {
        "benchmark": "runtime", "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
        "worker": settings, "reconciler": reconciler_figures,
        # other work on the host: the 1, 5 and 15 min load averages
        "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                "after_bare_vs_runtime": [round(x, 2) for x in load_compared]},
        "bare_canvas": bare, "runtime_instant_nodes": instant,
        "runtime_vs_bare": ratios,
        "targets": {"latency_ratio_max": 1.3, "throughput_ratio_min": 0.75,
                    "latency_met": ratios["latency_p50"] <= 1.3,
                    "throughput_met": ratios["throughput"] >= 0.75},
        "full_offline_runs": offline, "peak_memory": memory,
    }


def _reconciler_figures(compare: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The reconciler's settings, and its sweeps during the bare-vs-runtime comparison and
    over the whole script (a `verity reconcile` process) or the offline part (beat embedded in
    each worker: the second worker's beat)."""
    keys = ("sweeps", "actions", "alive")
    figures = {k: v for k, v in compare.items() if k not in keys}
    if "sweeps" in compare:
        figures["during_bare_vs_runtime"] = {k: compare[k] for k in keys if k in compare}
        later = "during_offline_and_memory" if compare["kind"] == "beat" else "whole_script"
        figures[later] = {k: after[k] for k in keys if k in after}
    return figures


def _compare(args: argparse.Namespace,
             worker: Worker) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bare canvas and instant runs, interleaved so both see the same machine; the workers'
    CPU time over each throughput batch, per run."""
    from bench.bare_tasks import canvas
    from bench.instant import TOOL_CALLS, build_runtime
    from client import VerityClient
    from pipeline.config import VeritySettings

    runtime = build_runtime(VeritySettings())
    client = VerityClient(runtime, tenant="bench")

    def bare_one() -> float:
        start = time.time()
        finished = canvas(TOOL_CALLS).apply_async().get(timeout=60)
        return float(finished) - start

    def instant_one() -> float:
        start = time.time()
        run_id = client.submit("bench", data_source=None)
        record = client.wait(run_id, timeout=60, poll=0.02)
        assert record.status.value == "SUCCESS", record.status
        assert record.finished_at is not None
        return record.finished_at.timestamp() - start

    for _ in range(3):  # warm both paths
        bare_one()
        instant_one()
    bare_lat, inst_lat = [], []
    for _ in range(args.runs):
        bare_lat.append(bare_one())
        inst_lat.append(instant_one())
    log(f"latency: bare p50 {statistics.median(bare_lat):.4f}s, "
        f"instant p50 {statistics.median(inst_lat):.4f}s")
    bare_tp: list[float] = []
    inst_tp: list[float] = []
    cpu = {"bare": 0.0, "instant": 0.0}

    def timed(kind: str, measure: Any) -> float:
        before = worker.cpu_seconds()
        runs_per_s = float(measure())
        cpu[kind] += worker.cpu_seconds() - before
        return runs_per_s

    for round_ in range(args.rounds):  # alternate who goes first: drift hits both alike
        pair = [lambda: bare_tp.append(timed("bare", lambda: throughput_bare(
                    args.batch, canvas, TOOL_CALLS))),
                lambda: inst_tp.append(timed("instant", lambda: _throughput_runs(
                    client, args.batch, data_source=None, query="bench")))]
        for measure in pair if round_ % 2 == 0 else reversed(pair):
            measure()
    runtime.store.close()
    runs = args.rounds * args.batch
    return (run_figures(bare_lat, bare_tp, cpu_s_per_run=cpu["bare"] / runs),
            run_figures(inst_lat, inst_tp, cpu_s_per_run=cpu["instant"] / runs))


def throughput_bare(batch: int, canvas: Any, tool_calls: int) -> float:
    start = time.perf_counter()
    results = [canvas(tool_calls).apply_async() for _ in range(batch)]
    for result in results:
        result.get(timeout=120)
    return batch / (time.perf_counter() - start)


def _throughput_runs(client: Any, batch: int, *, data_source: str | None, query: str) -> float:
    return throughput_of(lambda: client.submit(query, data_source=data_source), batch)


def throughput_of(submit: Any, batch: int) -> float:
    """Runs a second: submit a batch (`submit()` returns a run id), then watch it with one query
    every 20 ms (the canvas side waits on Redis pub/sub; polling each run would load the two
    shared cores with our own reads)."""
    from sqlalchemy import create_engine, text

    start = time.perf_counter()
    run_ids = [submit() for _ in range(batch)]
    engine = create_engine(os.environ["VERITY_DATABASE_URL"])
    finished = text(
        "SELECT count(*) FROM diagnosis_run WHERE run_id = ANY(:ids) "
        "AND status IN ('SUCCESS', 'FALLBACK', 'FAILED', 'CANCELLED')"
    )
    deadline = time.monotonic() + 300
    with engine.connect() as connection:
        while connection.execute(finished, {"ids": run_ids}).scalar_one() < batch:
            connection.rollback()
            if time.monotonic() > deadline:
                raise SystemExit("runs did not finish in time")
            time.sleep(0.02)
    elapsed = time.perf_counter() - start
    engine.dispose()
    return batch / elapsed


def _offline(args: argparse.Namespace) -> dict[str, Any]:
    from client import VerityClient
    from pipeline.factory import build_runtime
    from pipeline.scenarios import default_scenarios_dir

    runtime = build_runtime()
    client = VerityClient(runtime, tenant="bench")
    source = str(default_scenarios_dir() / SCENARIO)
    latencies = []
    for i in range(max(args.runs // 2, 5) + 2):
        start = time.time()
        record = client.wait(client.submit(QUESTION, data_source=source), timeout=120,
                             poll=0.002)
        assert record.status.value == "SUCCESS" and record.finished_at is not None
        if i >= 2:  # the first runs load the scenario into the worker
            latencies.append(record.finished_at.timestamp() - start)
    throughput = [_throughput_runs(client, args.batch, data_source=source, query=QUESTION)]
    runtime.store.close()
    figures = run_figures(latencies, throughput)
    figures["scenario"] = SCENARIO
    return figures


def _memory(worker: Worker, inflight: int) -> dict[str, Any]:
    from client import VerityClient
    from pipeline.factory import build_runtime
    from pipeline.scenarios import default_scenarios_dir

    runtime = build_runtime()
    client = VerityClient(runtime, tenant="bench")
    source = str(default_scenarios_dir() / SCENARIO)
    before = worker.rss_mb()
    start = time.perf_counter()
    run_ids = [client.submit(QUESTION, data_source=source) for _ in range(inflight)]
    statuses = [client.wait(run_id, timeout=900, poll=0.05).status.value for run_id in run_ids]
    elapsed = time.perf_counter() - start
    runtime.store.close()
    return {"runs_in_flight": inflight, "rss_before_mb": round(before, 1),
            "peak_rss_mb": round(worker.peak_rss_mb(), 1),
            "succeeded": statuses.count("SUCCESS"), "elapsed_s": round(elapsed, 2)}


def run_figures(latencies: list[float], throughput: list[float],
             cpu_s_per_run: float | None = None) -> dict[str, Any]:
    ordered = sorted(latencies)
    cpu = {} if cpu_s_per_run is None else {
        "worker_cpu_ms_per_run": round(cpu_s_per_run * 1000, 2)}
    return {
        "samples": len(ordered),
        "latency_s": {"p50": round(statistics.median(ordered), 5),
                      "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 5),
                      "min": round(ordered[0], 5)},
        "throughput_runs_per_s": round(statistics.median(throughput), 2),
        "throughput_samples": [round(t, 2) for t in throughput],
        **cpu,
    }


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


if __name__ == "__main__":
    main()
