"""Batch re-verification benchmark: stored runs re-judged per minute by real workers, beside
`verity verify` on the same bundles in one process, and the worker's memory by batch size.

One real offline run of each shipped diagnosis scenario is stored in a PostgreSQL schema of its
own, then copied (rows and invocations, new ids) to the largest batch size. Then, on the local
Redis:
- in process: `verify_bundle` over the same bundles, one after another (one core);
- one worker process with one thread (`verity worker --queues batch --concurrency 1`): a batch
  of `--runs` runs; runs/min beside the in-process figure is the runtime's batch overhead;
- `--processes` worker processes: the same batch size, for throughput on this machine;
- memory: a fresh single worker for a batch of `--runs`, then one for `--big`; its peak RSS.
Prints one JSON object.

    python bench/reverify.py [--runs 1000] [--big 10000] [--processes 2] [--chunk-size 50]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.services import REDIS, Worker, flush_redis, log, scratch_database  # noqa: E402

TENANT = "bench"
TARGET_RUNS_PER_MIN = 1000
TARGET_OVERHEAD = 1.5
TARGET_MEMORY_RATIO = 1.2


def main() -> None:
    args = _arguments()
    with scratch_database("verity_bench_reverify") as db_url:
        os.environ.update({"VERITY_BROKER_URL": REDIS, "VERITY_RESULT_BACKEND": REDIS,
                           "VERITY_DATABASE_URL": db_url, "VERITY_TENANT": TENANT,
                           "VERITY_PROVIDER": "offline"})
        os.environ.pop("VERITY_RUNTIME_FACTORY", None)
        report = _run(args, db_url)
    print(json.dumps(report, indent=2))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="Runs in a measured batch.")
    parser.add_argument("--big", type=int, default=10000, help="Runs in the memory batch.")
    parser.add_argument("--processes", type=int, default=2, help="Workers for throughput.")
    parser.add_argument("--chunk-size", type=int, default=50, help="Items per chunk task.")
    parser.add_argument("--inprocess-s", type=float, default=10.0,
                        help="Seconds of in-process verify_bundle.")
    args = parser.parse_args()
    if args.runs < 1 or args.big < args.runs or args.processes < 1:
        parser.error("need 1 <= --runs <= --big and --processes >= 1")
    return args


def _run(args: argparse.Namespace, db_url: str) -> dict[str, Any]:
    from pipeline.config import VeritySettings
    from pipeline.factory import build_runtime

    runtime = build_runtime(VeritySettings())
    templates = _template_runs(runtime)
    log(f"{len(templates)} template runs stored; copying to {args.big}")
    started = time.perf_counter()
    _copy_runs(db_url, templates, total=args.big)
    log(f"copied in {time.perf_counter() - started:.1f} s")
    inprocess = _in_process(runtime, templates, seconds=args.inprocess_s)
    log(f"in process: {inprocess['runs_per_min']:.0f} runs/min")
    single = _batch(runtime, runs=args.runs, chunk_size=args.chunk_size, processes=1)
    log(f"1 worker process: {single['runs_per_min']:.0f} runs/min")
    many = _batch(runtime, runs=args.runs, chunk_size=args.chunk_size,
                  processes=args.processes)
    log(f"{args.processes} worker processes: {many['runs_per_min']:.0f} runs/min")
    big = _batch(runtime, runs=args.big, chunk_size=args.chunk_size, processes=1)
    log(f"memory: {single['peak_rss_mb']} MB for {args.runs}, {big['peak_rss_mb']} MB for "
        f"{args.big}")
    runtime.store.close()
    overhead = inprocess["runs_per_min"] / single["runs_per_min"]
    memory_ratio = big["peak_rss_mb"] / single["peak_rss_mb"]
    return {
        "benchmark": "reverify",
        "machine_cpus": os.cpu_count(),
        "stored_runs": args.big, "template_runs": len(templates),
        "scenarios": sorted({name for _, name in templates}),
        "chunk_size": args.chunk_size,
        "in_process": inprocess,
        "batch_1_process": single,
        f"batch_{args.processes}_processes": many,
        "batch_big_1_process": big,
        "batch_overhead": round(overhead, 3),
        "memory_ratio_big_to_small": round(memory_ratio, 3),
        "targets": {"runs_per_min": TARGET_RUNS_PER_MIN, "batch_overhead": TARGET_OVERHEAD,
                    "memory_ratio": TARGET_MEMORY_RATIO},
        "meets_targets": {
            "runs_per_min": many["runs_per_min"] >= TARGET_RUNS_PER_MIN,
            "batch_overhead": overhead <= TARGET_OVERHEAD,
            "memory": memory_ratio <= TARGET_MEMORY_RATIO,
        },
        "note": "batch_overhead is in-process runs/min (warm, as a worker is) over one "
                "single-thread worker process's runs/min, measured in the same run; the batch "
                "with several processes is this machine's throughput. The stored runs are "
                "copies of one real run per scenario, so they share their texts: in_process.cold "
                "is the in-process rate with no text read before.",
    }


def _template_runs(runtime: Any) -> list[tuple[str, str]]:
    """One real offline run of each shipped diagnosis scenario: (run id, scenario)."""
    from models.common import Intent
    from pipeline.scenarios import default_scenarios_dir, list_scenarios
    from tests.providers.test_fake_runs import drive

    made = []
    for info in list_scenarios(default_scenarios_dir()):
        if info.intent is Intent.DIAGNOSIS:
            run_id = drive(runtime, info.name, tenant_id=TENANT)
            made.append((run_id, info.name))
    return made


def _copy_runs(db_url: str, templates: list[tuple[str, str]], *, total: int) -> None:
    """Copy the template runs (rows and invocations, new ids, older creation times) until
    `total` runs are stored; one INSERT ... SELECT per table and round."""
    from sqlalchemy import create_engine, text

    from models.tables import DiagnosisRunRow, ToolInvocationRow

    copies = -(-total // len(templates)) - 1
    run_columns = [c.name for c in DiagnosisRunRow.__table__.columns]
    call_columns = [c.name for c in ToolInvocationRow.__table__.columns if c.name != "id"]
    ids = [run_id for run_id, _ in templates]

    def renamed(columns: list[str], *, run_table: bool) -> str:
        out = []
        for name in columns:
            if name == "run_id":
                out.append("t.run_id || '-' || lpad(g::text, 5, '0')")
            elif name == "created_at" and run_table:
                out.append("t.created_at - g * interval '1 second'")
            else:
                out.append(f"t.{name}")
        return ", ".join(out)

    engine = create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text(
            f"INSERT INTO diagnosis_run ({', '.join(run_columns)}) "
            f"SELECT {renamed(run_columns, run_table=True)} FROM diagnosis_run t, "
            f"generate_series(1, :copies) g WHERE t.run_id = ANY(:ids)"),
            {"copies": copies, "ids": ids})
        connection.execute(text(
            f"INSERT INTO tool_invocation ({', '.join(call_columns)}) "
            f"SELECT {renamed(call_columns, run_table=False)} FROM tool_invocation t, "
            f"generate_series(1, :copies) g WHERE t.run_id = ANY(:ids)"),
            {"copies": copies, "ids": ids})
        connection.execute(text("ANALYZE"))
    engine.dispose()


def _in_process(runtime: Any, templates: list[tuple[str, str]], *, seconds: float
                ) -> dict[str, Any]:
    """`verity verify --json`'s work on the exported template bundles, one after another, for
    `seconds`: each bundle's JSON text is loaded (checked against the input limits), verified
    and its result serialized as verify prints it (not written: no terminal in the figure).
    Warm (the facts of texts already read are kept across runs, as in a worker) and cold
    (that cache cleared before each run: the copies share every text, real runs fewer)."""
    from pipeline.factory import offline_agents
    from pipeline.rules import facts
    from pipeline.verification import load_bundle, verify_bundle

    texts = [runtime.store.to_bundle(run_id, tenant_id=TENANT).model_dump_json()
             for run_id, _ in templates]
    agents = offline_agents()
    out: dict[str, Any] = {}
    printed = 0
    for mode in ("cold", "warm"):
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds / 2:
            for text in texts:
                if mode == "cold":
                    facts.clear_caches()
                run = verify_bundle(load_bundle(text, settings=runtime.settings),
                                    verifier=agents.verifier, composer=agents.composer,
                                    settings=runtime.settings)
                printed += len(json.dumps(run.result.model_dump(mode="json"),
                                          ensure_ascii=False))
                done += 1
        elapsed = time.perf_counter() - started
        out[mode] = {"runs": done, "seconds": round(elapsed, 2),
                     "runs_per_min": round(done / elapsed * 60, 1)}
    return {**out["warm"], "cold": out["cold"]}


def _batch(runtime: Any, *, runs: int, chunk_size: int, processes: int) -> dict[str, Any]:
    """A batch of `runs` through `processes` fresh single-thread worker processes."""
    from client import VerityClient
    from models.batch import Selection

    flush_redis()
    client = VerityClient(runtime, tenant=TENANT)
    with Worker([("batch", 1)] * processes, factory=None, include_bare=False) as workers:
        rss_before = workers.rss_mb()
        started = time.perf_counter()
        batch = client.reverify(Selection(limit=runs), provider="offline",
                                chunk_size=chunk_size)
        while not batch.status.terminal:
            time.sleep(0.2)
            batch = client.batch(batch.batch_id)
        elapsed = time.perf_counter() - started
        peak = workers.peak_rss_mb()
    return {"runs": batch.total, "judged": batch.done, "failed": batch.failed,
            "status": batch.status.value, "processes": processes,
            "seconds": round(elapsed, 2), "runs_per_min": round(batch.done / elapsed * 60, 1),
            "rss_before_mb": round(rss_before, 1), "peak_rss_mb": round(peak, 1)}


if __name__ == "__main__":
    main()
