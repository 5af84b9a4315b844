"""LLM-concurrency benchmark: runs on the Claude agents against a fake Messages API at 1 s a call.

The fake Anthropic server (`python -m fake_anthropic`, another process) answers every role as
Claude would (`tests.providers.claude_like`) after `--latency` seconds. The worker processes
are started as `verity worker` runs them (threads pool, task events) in the layout the README
recommends: one process of `--concurrency` threads on the llm queue and two of 16 threads on
control,tools (`--workers` gives another), with the Claude agents (VERITY_PROVIDER=anthropic,
ANTHROPIC_BASE_URL=the fake) on Redis database 13 and a fresh PostgreSQL schema. One run alone
gives the single-run latency; then `--runs` runs of one scenario are submitted at once and
watched with one query every 50 ms until all have ended.

    achieved = runs / seconds from the first submit until all were seen terminal
    ideal    = min(concurrency, runs) / (model calls per run x latency)

concurrency being the threads that serve the llm queue (every model call holds one) and the
model calls per run being counted from the runs' stored llm_attempt rows (planner, each
executor turn, verifier, composer: each waits for the one before it). Prints one JSON object.

    python bench/llm_concurrency.py [--runs 100] [--latency 1.0] [--concurrency 100]
                                    [--workers 'control,llm,tools=100']
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.runtime import (  # noqa: E402
    REDIS,
    _create_schema,
    _drop_schema,
    _flush_redis,
    _Worker,
    log,
)

SCENARIO = "checkout-pool-exhaustion"
TARGET = 0.9
POLL_S = 0.05
ROLES = ("planner", "executor", "verifier", "composer", "knowledge")
QUEUES = ("control", "llm", "tools")
# The layout the README recommends: the model calls' threads in one process, the short control
# and tool tasks in two others, so a tool chord never waits behind a model call.
DEFAULT_WORKERS = "llm={concurrency} control,tools=16 control,tools=16"
RESPONDERS = {role: f"tests.providers.claude_like:{role}" for role in ROLES}


def main() -> None:
    args = _arguments()
    from fake_anthropic import FakeAnthropic

    schema = f"verity_bench_{uuid.uuid4().hex[:12]}"
    db_url = _create_schema(schema)
    _flush_redis()
    try:
        with FakeAnthropic.spawn(latency=args.latency, script={"responders": RESPONDERS},
                                 record_limit=200) as fake:
            os.environ.update({
                "VERITY_BROKER_URL": REDIS, "VERITY_DATABASE_URL": db_url,
                "VERITY_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "bench-key",
                "ANTHROPIC_BASE_URL": fake.base_url,
            })
            report = _run(args, fake.process.pid)
    finally:
        _drop_schema(schema)
        _flush_redis()
    print(json.dumps(report, indent=2))
    _close_client()


def _close_client() -> None:
    """Release result consumers now, not during interpreter shutdown."""
    import gc

    from tasks.app import app

    gc.collect()
    app.close()


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="runs submitted at once")
    parser.add_argument("--latency", type=float, default=1.0,
                        help="seconds the fake server waits before every answer")
    parser.add_argument("--concurrency", type=int, default=100,
                        help="threads of the llm-queue worker (the default layout)")
    parser.add_argument("--workers", default="",
                        help="worker processes as QUEUES=THREADS separated by spaces, e.g. "
                             "'control,llm,tools=100' for one process on every queue (default: "
                             f"'{DEFAULT_WORKERS}')")
    parser.add_argument("--scenario", default=SCENARIO, help="the scenario every run diagnoses")
    parser.add_argument("--single", type=int, default=2,
                        help="runs measured one at a time for the single-run latency")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the batch")
    args = parser.parse_args()
    args.groups = _groups(args.workers or DEFAULT_WORKERS.format(concurrency=args.concurrency))
    return args


def _run(args: argparse.Namespace, fake_pid: int) -> dict[str, Any]:
    from pipeline.factory import build_runtime, resolve_scenario
    from pipeline.scenarios import load_scenario
    from tasks.client import VerityClient

    source = resolve_scenario(args.scenario, None)
    query = load_scenario(Path(source)).meta.question
    runtime = build_runtime()
    client = VerityClient(runtime)
    # the worker as bench/runtime.py starts it, on this process's environment: the Claude
    # agents against the fake server
    groups = args.groups
    llm_threads = sum(threads for queues, threads in groups if "llm" in queues.split(","))
    with _Worker(groups, factory=None, include_bare=False) as worker:
        log(f"workers ready ({worker.groups}); warm-up run")
        _single(client, query, source)  # loads the scenario and the HTTP client in the worker
        singles = [_single(client, query, source) for _ in range(max(args.single, 1))]
        log(f"single-run latency {statistics.median(singles):.3f}s; "
            f"submitting {args.runs} runs")
        pids = [*worker.pids, fake_pid]
        cpu_before = [*map(_cpu_s, pids), time.process_time()]
        services_before, machine_before = _services_cpu_s(), _machine_cpu_s()
        batch = _batch(client, args.runs, query, source, args.timeout)
        cpu_after = [*map(_cpu_s, pids), time.process_time()]
        services_after, machine_after = _services_cpu_s(), _machine_cpu_s()
        peak_rss = worker.peak_rss_mb()
    used = [round(b - a, 2) for a, b in zip(cpu_before, cpu_after, strict=True)]
    per_worker, others = used[:-2], used[-2:]
    cpu = [round(sum(per_worker), 2), *others]  # workers, fake server, this process
    services = {name: round(services_after[name] - services_before.get(name, 0.0), 2)
                for name in services_after}
    machine_busy, machine_all = (b - a for a, b in zip(machine_before, machine_after,
                                                        strict=True))
    attempts = {run_id: runtime.store.list_attempts(run_id) for run_id in batch["run_ids"]}
    records = [client.get(run_id) for run_id in batch["run_ids"]]
    runtime.store.close()
    calls = [len(rows) for rows in attempts.values()]
    per_role = collections.Counter(a.role for rows in attempts.values() for a in rows)
    mean_calls = statistics.fmean(calls)
    serial_s = mean_calls * args.latency
    in_flight = min(llm_threads, args.runs)
    ideal = in_flight / serial_s if serial_s > 0 else None
    achieved = args.runs / batch["elapsed_s"]
    efficiency = achieved / ideal if ideal else None
    model_ms = [a.latency_ms for rows in attempts.values() for a in rows]
    all_cpu_s = cpu[0] + cpu[1] + cpu[2] + sum(services.values())
    cores = os.cpu_count() or 1
    cpu_ceiling = args.runs * cores / all_cpu_s if all_cpu_s else None
    run_s = [(r.finished_at - r.created_at).total_seconds() for r in records
             if r.finished_at is not None and r.created_at is not None]
    statuses = [r.status.value for r in records]
    return {
        "benchmark": "llm_concurrency", "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "worker": {"pool": "threads", "concurrency": llm_threads,
                   "concurrency_is": "threads serving the llm queue, over all processes",
                   "processes": [{"queues": q, "threads": t} for q, t in groups],
                   "queues": "control,llm,tools", "provider": "anthropic",
                   "broker": "redis", "database": "postgresql",
                   "prefetch_multiplier": _prefetch_multiplier()},
        "fake_server": {"base_url_host": "127.0.0.1", "latency_s": args.latency,
                        "responders": "tests.providers.claude_like (every role)"},
        "scenario": args.scenario, "runs": args.runs,
        "model_calls_per_run": {
            "mean": round(mean_calls, 3), "min": min(calls), "max": max(calls),
            "by_role_mean": {role: round(n / len(calls), 3)
                             for role, n in sorted(per_role.items())},
            "source": "llm_attempt rows of the batch's runs"},
        "serial_model_latency_s": round(serial_s, 3),
        "single_run_latency_s": {"median": round(statistics.median(singles), 3),
                                 "samples": [round(s, 3) for s in singles]},
        "ideal_runs_per_s": round(ideal, 3) if ideal else None,
        "ideal_formula": "min(concurrency, runs) / (mean model calls per run x fake latency): "
                         "every run holds one worker thread while its model calls run one "
                         "after another, so at most min(concurrency, runs) runs progress at "
                         "once, each taking at least its serial model latency; equal to "
                         "concurrency / serial latency when runs >= concurrency",
        "achieved_runs_per_s": round(achieved, 3),
        "achieved_formula": "runs / seconds from the first submit until the poll (one query "
                            "every 50 ms) saw every run terminal",
        "efficiency": round(efficiency, 3) if efficiency is not None else None,
        "target_efficiency": TARGET,
        "meets_target": efficiency is not None and efficiency >= TARGET,
        "batch": {
            "elapsed_s": round(batch["elapsed_s"], 3),
            "submit_s": round(batch["submit_s"], 3),
            "last_finished_after_s": round(batch["last_finished_s"], 3),
            "run_latency_s": _spread(run_s),
            "model_call_latency_ms": _spread(model_ms),
            "cpu_s": {"worker": cpu[0], "per_worker_process": per_worker,
                      "fake_server": cpu[1], "this_process": cpu[2], **services},
            "worker_cpu_s_per_run": round(cpu[0] / args.runs, 4),
            "worker_cores_busy": round(cpu[0] / batch["elapsed_s"], 3),
            "worker_cpu_ceiling_runs_per_s": round(args.runs / cpu[0], 3) if cpu[0] else None,
            "all_cpu_s_per_run": round(all_cpu_s / args.runs, 4),
            "machine_cores_busy": round(cores * machine_busy / machine_all, 3)
            if machine_all else None,
            "cpu_ceiling_runs_per_s": round(cpu_ceiling, 3) if cpu_ceiling else None,
            "cpu_ceiling_efficiency": round(cpu_ceiling / ideal, 3)
            if cpu_ceiling and ideal else None,
            "peak_waiting_in_broker": {q: batch["queues"][q] for q in QUEUES},
            "peak_unacked": batch["queues"]["unacked"],
            "prefetch_limit": [t * _prefetch_multiplier() for _, t in groups],
        },
        "gaps_between_model_calls_ms": _gaps(attempts, records),
        "statuses": dict(collections.Counter(statuses)),
        "all_statuses": statuses,
        "worker_peak_rss_mb": round(peak_rss, 1),
    }


def _gaps(attempts: dict[str, list[Any]], records: list[Any]) -> dict[str, dict[str, float]]:
    """Per transition, the time from one model call's end (its row's commit) to the next
    call's start: queueing, the node's reads and writes, the tools and deterministic nodes
    between them. `start` is from submit to the first call, `end` from the last to finish."""
    by_run = {r.run_id: r for r in records}
    gaps: dict[str, list[float]] = collections.defaultdict(list)
    for run_id, rows in attempts.items():
        rows = sorted(rows, key=lambda a: a.created_at)
        record = by_run[run_id]
        previous, label = record.created_at, "start"
        for row in rows:
            began = row.created_at.timestamp() - row.latency_ms / 1000
            gaps[f"{label}->{row.role}"].append((began - previous.timestamp()) * 1000)
            previous, label = row.created_at, row.role
        if record.finished_at is not None:
            gaps[f"{label}->end"].append(
                (record.finished_at.timestamp() - previous.timestamp()) * 1000)
    return {name: _spread(values) for name, values in gaps.items()}


def _groups(spec: str) -> list[tuple[str, int]]:
    """`'llm=100 control,tools=16'` → `[("llm", 100), ("control,tools", 16)]`."""
    groups = []
    for item in spec.split():
        queues, _, threads = item.rpartition("=")
        known = set(queues.split(",")) <= set(QUEUES)
        if not queues or not known or not threads.isdigit() or int(threads) < 1:
            raise SystemExit(f"--workers: {item!r} is not QUEUES=THREADS with queues among "
                             f"{','.join(QUEUES)} and at least one thread")
        groups.append((queues, int(threads)))
    if not any("llm" in queues.split(",") for queues, _ in groups):
        raise SystemExit("--workers: no process consumes the llm queue")
    return groups


def _prefetch_multiplier() -> int:
    import celeryconfig

    return int(celeryconfig.worker_prefetch_multiplier)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _services_cpu_s() -> dict[str, float]:
    """CPU seconds so far of this host's PostgreSQL and Redis server processes, summed by
    service (a backend that exits during the batch takes its share with it)."""
    names = {"postgres": "postgresql", "redis-server": "redis"}
    totals = dict.fromkeys(names.values(), 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = names.get((entry / "comm").read_text().strip())
            if name is not None:
                totals[name] += _cpu_s(int(entry.name))
        except OSError:  # the process ended meanwhile
            continue
    return totals


def _machine_cpu_s() -> tuple[float, float]:
    """Busy and total CPU time of the whole machine so far, in clock ticks (/proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    total = sum(ticks[:8])  # guest time is already counted in user
    return float(total - idle), float(total)


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
            "max": round(ordered[-1], 3), "min": round(ordered[0], 3)}


def _single(client: Any, query: str, source: str) -> float:
    start = time.time()
    record = client.wait(client.submit(query, data_source=source), timeout=120, poll=POLL_S)
    if record.finished_at is None or not record.status.terminal:
        raise SystemExit(f"the single run did not end: {record.status.value}")
    return record.finished_at.timestamp() - start


def _batch(client: Any, runs: int, query: str, source: str, timeout: float) -> dict[str, Any]:
    """Submit `runs` at once, then one count query every 50 ms until every run has ended; every
    10th poll also reads the broker's queue lengths and the worker's unacked messages."""
    import redis
    from sqlalchemy import create_engine, text

    engine = create_engine(os.environ["VERITY_DATABASE_URL"])
    broker = redis.Redis.from_url(REDIS)
    finished = text(
        "SELECT count(*), max(finished_at) FROM diagnosis_run WHERE run_id = ANY(:ids) "
        "AND status IN ('SUCCESS', 'FALLBACK', 'FAILED', 'CANCELLED')"
    )
    queues: dict[str, int] = dict.fromkeys((*QUEUES, "unacked"), 0)
    wall = time.time()
    start = time.perf_counter()
    run_ids = [client.submit(query, data_source=source) for _ in range(runs)]
    submitted = time.perf_counter() - start
    deadline = time.monotonic() + timeout
    shown = polls = 0
    with engine.connect() as connection:
        while True:
            done, last = connection.execute(finished, {"ids": run_ids}).one()
            connection.rollback()
            if done >= runs:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {done} of {runs} runs ended in {timeout}s")
            if polls % 10 == 0:
                _sample_queues(broker, queues)
            if done >= shown + max(runs // 10, 1):
                shown = done
                log(f"  {done}/{runs} ended after {time.perf_counter() - start:.1f}s")
            polls += 1
            time.sleep(POLL_S)
    elapsed = time.perf_counter() - start
    engine.dispose()
    broker.close()
    return {"run_ids": run_ids, "elapsed_s": elapsed, "submit_s": submitted,
            "last_finished_s": last.timestamp() - wall, "queues": queues}


def _sample_queues(broker: Any, peaks: dict[str, int]) -> None:
    """Raise `peaks` to the messages now waiting in each queue and held unacked by the worker
    (prefetched or running: acks are late)."""
    pipe = broker.pipeline(transaction=False)
    for queue in QUEUES:
        pipe.llen(queue)
    pipe.hlen("unacked")
    for name, value in zip((*QUEUES, "unacked"), pipe.execute(), strict=True):
        peaks[name] = max(peaks[name], int(value))


if __name__ == "__main__":
    main()
