"""Runtime benchmark: Verity's Celery runtime against a bare Celery canvas, side by side.

One worker process (threads pool) on the local Redis and PostgreSQL runs, interleaved:
- the bare canvas: no-op tasks in the same shape and number as one run;
- instant runs: the real runtime (coordinator, store persistence, tool chord) with node bodies
  that return at once (bench/instant.py);
then, with the same worker settings, full offline runs on a shipped scenario, and 200 runs in
flight for the worker's peak memory. Prints one JSON object.

    python bench/runtime.py [--runs 30] [--batch 40] [--inflight 200] [--concurrency 8]
                            [--reconciler reconcile|beat|none]

A reconciler runs beside the workers throughout (default a `verity reconcile` process at its
default interval; `--reconciler beat` embeds beat in the worker as `verity worker --beat`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("VERITY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("VERITY_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
SCENARIO = "checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    args = _arguments()
    schema = f"verity_bench_{uuid.uuid4().hex[:12]}"
    db_url = _create_schema(schema)
    os.environ.update({"VERITY_BROKER_URL": REDIS, "VERITY_DATABASE_URL": db_url})
    _flush_redis()
    try:
        report = _run(args, db_url)
    finally:
        _drop_schema(schema)
        _flush_redis()
    print(json.dumps(report, indent=2))
    _close_client()


def _close_client() -> None:
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
    with _Reconciler(args.reconciler) as reconciler:
        with _Worker(every_queue, factory="bench.instant:build_runtime", beat=beat) as worker:
            reconciler.worker = worker
            bare, instant = _compare(args)
            reconciler_compare = reconciler.report()
            load_compared = os.getloadavg()
        with _Worker(every_queue, factory=None, beat=beat) as worker:
            reconciler.worker = worker
            offline = _offline(args)
            memory = _memory(worker, args.inflight)
            reconciler_after = reconciler.report()
    reconciler_figures = _reconciler_figures(reconciler_compare, reconciler_after)
    ratios = {
        "latency_p50": _ratio(instant["latency_s"]["p50"], bare["latency_s"]["p50"]),
        "latency_p90": _ratio(instant["latency_s"]["p90"], bare["latency_s"]["p90"]),
        "throughput": _ratio(instant["throughput_runs_per_s"], bare["throughput_runs_per_s"]),
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


class _Worker:
    """`celery worker` as `verity worker` runs it (threads pool, task events): one process per
    `(queues, threads)` group on this host, plus the bare baseline's tasks when
    `include_bare`."""

    def __init__(self, groups: list[tuple[str, int]], *, factory: str | None,
                 include_bare: bool = True, beat: bool = False) -> None:
        self.groups = groups
        self.factory = factory
        self.include_bare = include_bare
        # the first process on the control queue embeds beat (as `verity worker --beat`)
        self.beat_index = next((i for i, (queues, _) in enumerate(groups)
                                if "control" in queues.split(",")), None) if beat else None
        if beat and self.beat_index is None:
            raise SystemExit("--reconciler beat: no worker process consumes the control queue")
        self._beat_dir: str | None = None
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs = [Path(f"/tmp/verity-bench-worker-{os.getpid()}-{i}.log")
                     for i in range(len(self.groups))]

    def __enter__(self) -> _Worker:
        env = dict(os.environ)
        env.pop("VERITY_RUNTIME_FACTORY", None)
        if self.factory:
            env["VERITY_RUNTIME_FACTORY"] = self.factory
        extra = ["--include", "bench.bare_tasks"] if self.include_bare else []
        for i, ((queues, threads), log_path) in enumerate(
                zip(self.groups, self.logs, strict=True)):
            argv = ["worker", "--pool", "threads", "--concurrency", str(threads),
                    "--hostname", f"bench{i}@%h",
                    "--queues", queues, "--task-events", "--without-gossip",
                    "--without-mingle", "--loglevel", "INFO", *extra]
            if i == self.beat_index:
                # `verity worker --beat`: beat a thread of the worker, its schedule file in a
                # folder of its own
                self._beat_dir = tempfile.mkdtemp(prefix="verity-bench-beat-")
                command = [sys.executable, "-c", _BEAT_WORKER, *argv, "--beat", "--schedule",
                           str(Path(self._beat_dir) / "schedule")]
            else:
                command = [sys.executable, "-m", "celery", "--app", "tasks.app", *argv]
            with log_path.open("wb") as out:
                self.processes.append(subprocess.Popen(
                    command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                ))
        deadline = time.monotonic() + 30
        for process, log_path in zip(self.processes, self.logs, strict=True):
            while b"ready." not in log_path.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SystemExit(f"worker did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.1)
        return self

    def __exit__(self, *_: object) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(30)
        if self._beat_dir is not None:
            shutil.rmtree(self._beat_dir, ignore_errors=True)

    def beat_sweeps(self) -> dict[str, Any]:
        """The embedded beat's sweeps so far, from the workers' logs (any control worker may
        run one): how many ran and what they did, summed (`verity.reconcile.sweep` returns
        its counts)."""
        if self.beat_index is None:
            return {}
        lines = [line for log_path in self.logs
                 for line in log_path.read_text(errors="replace").splitlines()
                 if "verity.reconcile.sweep[" in line and " succeeded in " in line]
        return _sweep_totals(line[line.index("{", line.index(" succeeded in ")):]
                             for line in lines if "{" in line)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def peak_rss_mb(self) -> float:
        """The workers' peak resident memory (VmHWM), summed."""
        return self._status_mb("VmHWM:")

    def rss_mb(self) -> float:
        """The workers' resident memory now (VmRSS), summed."""
        return self._status_mb("VmRSS:")

    def _status_mb(self, key: str) -> float:
        total = 0
        for pid in self.pids:
            status = Path(f"/proc/{pid}/status").read_text()
            line = next(x for x in status.splitlines() if x.startswith(key))
            total += int(line.split()[1])
        return total / 1024


_BEAT_WORKER = ("import sys\n"
                "from tasks.reconcile import use_threaded_beat\n"
                "use_threaded_beat()\n"
                "from tasks.app import app\n"
                "app.worker_main(sys.argv[1:])\n")

RECONCILERS = ("reconcile", "beat", "none")


class _Reconciler:
    """The reconciler beside the workers: `reconcile`, a `verity reconcile` process (its
    sweeps every VERITY_RECONCILE_INTERVAL_S, 15 s unless set); `beat`, beat embedded in the
    first worker on the control queue (`_Worker(beat=True)`, as `verity worker --beat`);
    `none`."""

    def __init__(self, kind: str) -> None:
        if kind not in RECONCILERS:
            raise SystemExit(f"--reconciler: {kind!r}; choose among {', '.join(RECONCILERS)}")
        self.kind = kind
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/verity-bench-reconcile-{os.getpid()}.log")
        self.worker: _Worker | None = None

    def __enter__(self) -> _Reconciler:
        if self.kind == "reconcile":
            with self.log.open("wb") as out:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "cli.main", "reconcile"], cwd=ROOT,
                    env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
            # its start-up (imports, the schema check, the first sweep: about a CPU second)
            # is over before anything is measured
            deadline = time.monotonic() + 60
            while b"{" not in self.log.read_bytes():
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SystemExit("verity reconcile did not start: "
                                     f"{self.log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.1)
        return self

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def report(self) -> dict[str, Any]:
        """Which reconciler ran, its interval and staleness threshold, whether it is still
        alive, and its sweeps so far with what they did."""
        from pipeline.config import VeritySettings

        settings = VeritySettings()
        found: dict[str, Any] = {
            "kind": self.kind,
            "runs_as": {"reconcile": "a `verity reconcile` process",
                        "beat": "beat embedded in the first control worker (a thread, as "
                                "`verity worker --beat`)",
                        "none": "no reconciler"}[self.kind]}
        if self.kind == "none":
            return found
        found |= {"interval_s": settings.reconcile_interval_s,
                  "stale_after_s": settings.reconcile_stale_s}
        if self.process is not None:
            found["alive"] = self.process.poll() is None
            lines = self.log.read_text(errors="replace").splitlines()
            found |= _sweep_totals(line for line in lines if line.startswith("{"))
        elif self.worker is not None:
            found["alive"] = all(p.poll() is None for p in self.worker.processes)
            found |= self.worker.beat_sweeps()
        return found


def _sweep_totals(lines: Any) -> dict[str, Any]:
    """Sweeps counted and their counts summed, from one dict per sweep (JSON or repr)."""
    import ast

    sweeps, totals = 0, collections.Counter[str]()
    for line in lines:
        try:
            counts = json.loads(line)
        except ValueError:
            try:
                counts = ast.literal_eval(line.strip())
            except (ValueError, SyntaxError):
                continue
        if isinstance(counts, dict):
            sweeps += 1
            totals.update({k: v for k, v in counts.items() if isinstance(v, int)})
    return {"sweeps": sweeps, "actions": dict(totals)}


def _compare(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bare canvas and instant runs, interleaved so both see the same machine."""
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
    bare_tp, inst_tp = [], []
    for round_ in range(args.rounds):  # alternate who goes first: drift hits both alike
        pair = [lambda: bare_tp.append(_throughput_bare(args.batch, canvas, TOOL_CALLS)),
                lambda: inst_tp.append(_throughput_runs(client, args.batch, data_source=None,
                                                        query="bench"))]
        for measure in pair if round_ % 2 == 0 else reversed(pair):
            measure()
    runtime.store.close()
    return _figures(bare_lat, bare_tp), _figures(inst_lat, inst_tp)


def _throughput_bare(batch: int, canvas: Any, tool_calls: int) -> float:
    start = time.perf_counter()
    results = [canvas(tool_calls).apply_async() for _ in range(batch)]
    for result in results:
        result.get(timeout=120)
    return batch / (time.perf_counter() - start)


def _throughput_runs(client: Any, batch: int, *, data_source: str | None, query: str) -> float:
    """Submit a batch, then watch it with one query every 20 ms (the canvas side waits on
    Redis pub/sub; polling each run would load the two shared cores with our own reads)."""
    from sqlalchemy import create_engine, text

    start = time.perf_counter()
    run_ids = [client.submit(query, data_source=data_source) for _ in range(batch)]
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
    figures = _figures(latencies, throughput)
    figures["scenario"] = SCENARIO
    return figures


def _memory(worker: _Worker, inflight: int) -> dict[str, Any]:
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


def _figures(latencies: list[float], throughput: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "samples": len(ordered),
        "latency_s": {"p50": round(statistics.median(ordered), 5),
                      "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 5),
                      "min": round(ordered[0], 5)},
        "throughput_runs_per_s": round(statistics.median(throughput), 2),
        "throughput_samples": [round(t, 2) for t in throughput],
    }


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def _create_schema(schema: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(PG)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    url = make_url(PG).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def _drop_schema(schema: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(PG)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def _flush_redis() -> None:
    import redis

    client = redis.Redis.from_url(REDIS)
    client.flushdb()
    client.close()


if __name__ == "__main__":
    main()
