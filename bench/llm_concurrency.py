"""LLM-concurrency benchmark: runs on the Claude agents against a fake Messages API at 5 s a call.

The fake Anthropic server (`python -m fake_anthropic`, another process) answers every role as
Claude would (`tests.providers.claude_like`) after `--latency` seconds (5 s, a realistic model;
at 1 s the batch was a CPU test of a 2-core host). The worker processes are started as
`verity worker` runs them (threads pool, task events) in the layout the README recommends: two
processes sharing `--concurrency` threads on the llm queue and two of 16 threads on
control,tools (`--workers` gives another), with the Claude agents (VERITY_PROVIDER=anthropic,
ANTHROPIC_BASE_URL=the fake) on Redis database 13 and a fresh PostgreSQL schema, node leases on
(every model-calling node runs under its run's lease) and a reconciler running beside them
(`--reconciler`: a `verity reconcile` process by default, or beat embedded in the first control
worker). One run alone gives the single-run latency; then `--runs` runs of one scenario are
submitted at once and watched with one query every 50 ms until all have ended.

    achieved = runs / seconds from the first submit until all were seen terminal
    ideal    = min(concurrency, runs) / (model calls per run x latency)

concurrency being the threads that serve the llm queue (every model call holds one) and the
model calls per run being counted from the runs' stored llm_attempt rows (planner, each
executor turn, verifier, composer: each waits for the one before it). Prints one JSON object.

    python bench/llm_concurrency.py [--runs 200] [--latency 5.0] [--concurrency 100]
                                    [--workers 'control,llm,tools=100']
                                    [--reconciler reconcile|beat|none]
    python bench/llm_concurrency.py --runs 100 --latency 1.0    # the old, CPU-bound setting
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.services import RECONCILERS, REDIS, Reconciler, Worker, log, scratch_database  # noqa: E402

SCENARIO = "checkout-pool-exhaustion"
TARGET = 0.9
POLL_S = 0.05
ROLES = ("planner", "executor", "verifier", "composer", "knowledge")
QUEUES = ("control", "llm", "tools")
# The layout the README recommends: the model calls' threads in two processes (each thread's
# work around its call, the tool chord's dispatch included, queues for one interpreter lock:
# when a hundred calls end together, one process takes seconds to start the next ones), the
# short control and tool tasks in two others, so a tool chord never waits behind a model call.
DEFAULT_WORKERS = "llm={half} llm={rest} control,tools=16 control,tools=16"


def default_workers(concurrency: int) -> str:
    """The recommended layout for `concurrency` llm threads, split over two processes (one
    when there is a single thread)."""
    half = (concurrency + 1) // 2
    spec = DEFAULT_WORKERS.format(half=half, rest=concurrency - half)
    return spec.replace(" llm=0", "")
RESPONDERS = {role: f"tests.providers.claude_like:{role}" for role in ROLES}


def main() -> None:
    args = _arguments()
    from fake_anthropic import FakeAnthropic

    with scratch_database() as db_url, FakeAnthropic.spawn(
            latency=args.latency, script={"responders": RESPONDERS}, record_limit=200) as fake:
        os.environ.update({
            "VERITY_BROKER_URL": REDIS, "VERITY_DATABASE_URL": db_url,
            "VERITY_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "bench-key",
            "ANTHROPIC_BASE_URL": fake.base_url,
        })
        report = _run(args, fake.process.pid)
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
    parser.add_argument("--runs", type=int, default=200, help="runs submitted at once")
    parser.add_argument("--latency", type=float, default=5.0,
                        help="seconds the fake server waits before every answer")
    parser.add_argument("--concurrency", type=int, default=100,
                        help="threads serving the llm queue in the default layout, split over "
                             "two processes")
    parser.add_argument("--workers", default="",
                        help="worker processes as QUEUES=THREADS separated by spaces, e.g. "
                             "'control,llm,tools=100' for one process on every queue, "
                             "'llm=100 control,tools=16 control,tools=16' for the previous "
                             f"layout (default: '{default_workers(100)}')")
    parser.add_argument("--scenario", default=SCENARIO, help="the scenario every run diagnoses")
    parser.add_argument("--single", type=int, default=2,
                        help="runs measured one at a time for the single-run latency")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the batch")
    parser.add_argument("--reconciler", choices=RECONCILERS, default="reconcile",
                        help="the reconciler beside the workers: a `verity reconcile` process "
                             "(default), beat embedded in the first control worker (`verity "
                             "worker --beat`), or none")
    parser.add_argument("--timeline", action="store_true",
                        help="also print the median run's timeline (model calls, tools, "
                             "events) in the JSON")
    args = parser.parse_args()
    if args.concurrency < 1:
        raise SystemExit("--concurrency must be at least 1")
    args.groups = worker_groups(args.workers or default_workers(args.concurrency))
    return args


def _run(args: argparse.Namespace, fake_pid: int) -> dict[str, Any]:
    from client import VerityClient
    from pipeline.factory import build_runtime, resolve_scenario
    from pipeline.scenarios import load_scenario

    source = resolve_scenario(args.scenario, None)
    query = load_scenario(Path(source)).meta.question
    runtime = build_runtime()
    client = VerityClient(runtime, tenant="bench")
    # the worker as bench/runtime.py starts it, on this process's environment: the Claude
    # agents against the fake server
    groups = args.groups
    llm_threads = sum(threads for queues, threads in groups if "llm" in queues.split(","))
    beat = args.reconciler == "beat"
    with Reconciler(args.reconciler) as reconciler, \
            Worker(groups, factory=None, include_bare=False, beat=beat) as worker:
        reconciler.worker = worker
        log(f"workers ready ({worker.groups}); warm-up run")
        _single(client, query, source)  # loads the scenario and the HTTP client in the worker
        singles = [_single(client, query, source) for _ in range(max(args.single, 1))]
        log(f"single-run latency {statistics.median(singles):.3f}s; "
            f"submitting {args.runs} runs")
        pids = [*worker.pids, fake_pid, *filter(None, [reconciler.pid])]
        cpu_before = [*map(_cpu_s, pids), time.process_time()]
        services_before, machine_before = _services_cpu_s(), _machine_cpu_s()
        load_before = os.getloadavg()
        batch = _batch(client, args.runs, query, source, args.timeout)
        load_after = os.getloadavg()
        cpu_after = [*map(_cpu_s, pids), time.process_time()]
        services_after, machine_after = _services_cpu_s(), _machine_cpu_s()
        peak_rss = worker.peak_rss_mb()
        reconciled = reconciler.report()
    used = [round(b - a, 2) for a, b in zip(cpu_before, cpu_after, strict=True)]
    per_worker = used[:len(worker.pids)]
    fake_cpu, this_cpu = used[len(worker.pids)], used[-1]
    reconciler_cpu = used[len(worker.pids) + 1] if reconciler.pid else None
    cpu = [round(sum(per_worker), 2), fake_cpu, this_cpu]  # workers, fake server, this process
    if reconciler_cpu is not None:
        reconciled["cpu_s_during_batch"] = reconciler_cpu
    services = {name: round(services_after[name] - services_before.get(name, 0.0), 2)
                for name in services_after}
    machine_busy, machine_all = (b - a for a, b in zip(machine_before, machine_after,
                                                        strict=True))
    attempts = {run_id: runtime.store.list_attempts(run_id) for run_id in batch["run_ids"]}
    records = [client.get(run_id) for run_id in batch["run_ids"]]
    tools, events = _tool_rows_and_events(batch["run_ids"])
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
    all_cpu_s = cpu[0] + cpu[1] + cpu[2] + (reconciler_cpu or 0.0) + sum(services.values())
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
                   "prefetch_multiplier": _prefetch_multiplier(),
                   "node_lease": _lease_settings()},
        "reconciler": reconciled,
        "load_average_1_5_15": {"before_batch": [round(x, 2) for x in load_before],
                                "after_batch": [round(x, 2) for x in load_after]},
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
                      "fake_server": cpu[1], "this_process": cpu[2],
                      **({"reconciler": reconciler_cpu} if reconciler_cpu is not None else {}),
                      **services},
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
            "mean_waiting_in_broker": {q: batch["mean_queues"][q] for q in QUEUES},
            # Little's law: messages waiting on average / model calls sent per second
            "mean_wait_in_llm_queue_s": round(
                batch["mean_queues"]["llm"] * batch["elapsed_s"] / sum(calls), 2),
            "peak_unacked": batch["queues"]["unacked"],
            "prefetch_limit": [t * _prefetch_multiplier() for _, t in groups],
        },
        "gaps_between_model_calls_ms": _gaps(attempts, records),
        "executor_to_executor_ms": _executor_turns(attempts, tools),
        "llm_threads": _llm_threads(attempts, batch, in_flight, args.latency, ideal,
                                    series=args.timeline),
        "statuses": dict(collections.Counter(statuses)),
        "all_statuses": statuses,
        "worker_peak_rss_mb": round(peak_rss, 1),
    } | ({"median_run_timeline": _timeline(attempts, tools, events, records, run_s),
          "queue_series": {"columns": ["s", *QUEUES, "unacked"],
                           "rows": batch["queue_series"]}}
         if args.timeline else {})


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


def _tool_rows_and_events(run_ids: list[str]) -> tuple[dict[str, list[tuple[Any, ...]]],
                                                        dict[str, list[tuple[Any, ...]]]]:
    """Per run, its tool rows `(tool_name, created_at, finished_at)` (created by the
    executor's commit, finished by the tool's) and its events `(node, kind, created_at)`."""
    from sqlalchemy import create_engine, text

    engine = create_engine(os.environ["VERITY_DATABASE_URL"])
    tools: dict[str, list[tuple[Any, ...]]] = collections.defaultdict(list)
    events: dict[str, list[tuple[Any, ...]]] = collections.defaultdict(list)
    with engine.connect() as connection:
        for row in connection.execute(text(
                "SELECT run_id, tool_name, created_at, finished_at FROM tool_invocation "
                "WHERE run_id = ANY(:ids) ORDER BY seq"), {"ids": run_ids}):
            tools[row[0]].append(tuple(_utc(x) for x in row[1:]))
        for row in connection.execute(text(
                "SELECT run_id, node, kind, created_at FROM run_event "
                "WHERE run_id = ANY(:ids) ORDER BY seq"), {"ids": run_ids}):
            events[row[0]].append(tuple(_utc(x) for x in row[1:]))
    engine.dispose()
    return tools, events


def _utc(value: Any) -> Any:
    """A naive timestamp read back from the store is UTC (the store writes UTC)."""
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def _executor_turns(attempts: dict[str, list[Any]],
                    tools: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    """The gap between two Executor calls of a run, cut where its tool calls show: `commit`,
    the call's end to its tool rows (the node's own work after the call and its commit);
    `tools`, those rows created to the last of them finished (the chord's dispatch, the
    tools' wait in their queue and their work); `after_tools`, the last tool finished to the
    next call's start (the chord's join, the coordinator, the execute message's wait in the
    llm queue, the node's lease and load)."""
    parts: dict[str, list[float]] = collections.defaultdict(list)
    for run_id, rows in attempts.items():
        calls = sorted((a for a in rows if a.role == "executor"), key=lambda a: a.created_at)
        for before, after in zip(calls, calls[1:], strict=False):
            ended = before.created_at.timestamp()
            began = after.created_at.timestamp() - after.latency_ms / 1000
            turn = [t for t in tools.get(run_id, [])
                    if t[1] is not None and ended <= t[1].timestamp() <= began]
            parts["total"].append((began - ended) * 1000)
            if not turn or any(t[2] is None for t in turn):
                continue
            created = min(t[1].timestamp() for t in turn)
            finished = max(t[2].timestamp() for t in turn)
            parts["commit"].append((created - ended) * 1000)
            parts["tools"].append((finished - created) * 1000)
            parts["after_tools"].append((began - finished) * 1000)
            parts["tool_calls_in_turn"].append(len(turn))
    return {name: _spread(values) for name, values in parts.items()}


def _llm_threads(attempts: dict[str, list[Any]], batch: dict[str, Any], threads: int,
                 latency: float, ideal: float | None, *, series: bool = False
                 ) -> dict[str, Any]:
    """Where the time of the `threads` llm threads that can be busy at once (min(concurrency,
    runs)) went during the batch, from the model calls' rows (a call ran from its row's commit
    minus its latency to its commit): in a call, idle before the tail (the start's ramp, the
    node's own work around its call, an llm queue run dry), and idle in the tail (after the
    last moment every thread was in a call). In seconds of the batch's wall time: the ideal's
    elapsed plus what each loss adds (calls longer than the fake's latency: HTTP, SDK, the
    lane's thread; idle threads)."""
    start = batch["wall"]
    elapsed = batch["elapsed_s"]
    spans = sorted((a.created_at.timestamp() - a.latency_ms / 1000 - start,
                    a.created_at.timestamp() - start)
                   for rows in attempts.values() for a in rows)
    marks = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    in_flight, last, busy = 0, 0.0, 0.0
    saturated_until = 0.0
    full_s = 0.0
    timeline: list[tuple[float, int]] = []
    for at, step in marks:
        at = min(max(at, 0.0), elapsed)
        busy += in_flight * (at - last)
        if in_flight >= threads:
            full_s += at - last
            saturated_until = at
        in_flight += step
        last = at
        timeline.append((at, in_flight))
    busy += in_flight * max(elapsed - last, 0.0)
    bins = [0.0] * (int(elapsed / 0.5) + 1)  # thread-seconds busy per half second
    for (a, n), (b, _) in zip(timeline, [*timeline[1:], (elapsed, 0)], strict=True):
        for i in range(int(a / 0.5), min(int(b / 0.5), len(bins) - 1) + 1):
            bins[i] += n * max(0.0, min(b, (i + 1) * 0.5) - max(a, i * 0.5))
    idle_tail = sum(max(0, threads - n) * (b - a) for (a, n), (b, _) in
                    zip(timeline, [*timeline[1:], (elapsed, 0)], strict=True)
                    if a >= saturated_until)
    idle_total = threads * elapsed - busy
    calls = len(spans)
    overhead = busy - calls * latency
    ideal_elapsed = (len(attempts) / ideal) if ideal else None
    return {
        "model_calls": calls,
        "utilization": round(busy / (threads * elapsed), 3) if elapsed else None,
        "all_threads_busy_s": round(full_s, 2),
        "last_all_busy_after_s": round(saturated_until, 2),
        "batch_elapsed_s": round(elapsed, 2),
        "ideal_elapsed_s": round(ideal_elapsed, 2) if ideal_elapsed else None,
        "elapsed_added_s": {
            "model_calls_over_fake_latency": round(overhead / threads, 2),
            "idle_before_tail": round((idle_total - idle_tail) / threads, 2),
            "idle_in_tail": round(idle_tail / threads, 2),
        },
        "mean_call_over_fake_latency_ms": round(1000 * overhead / calls, 1) if calls else None,
        "accounting": "elapsed = ideal_elapsed + the three added parts (thread-seconds / "
                      "threads), up to the poll's last 50 ms",
    } | ({"mean_in_flight_per_half_second": [round(x / 0.5) for x in bins]} if series else {})


def _timeline(attempts: dict[str, list[Any]], tools: dict[str, list[tuple[Any, ...]]],
              events: dict[str, list[tuple[Any, ...]]], records: list[Any],
              run_s: list[float]) -> dict[str, Any]:
    """The run of median latency, step by step: ms from its submit to each model call's start
    and end, each tool row's creation and finish, and each event."""
    median = statistics.median_low(run_s)
    record = next(r for r in records if r.finished_at is not None and r.created_at is not None
                  and (r.finished_at - r.created_at).total_seconds() == median)
    origin = record.created_at.timestamp()
    steps: list[tuple[float, str]] = []
    for a in attempts[record.run_id]:
        end = a.created_at.timestamp()
        steps += [(end - a.latency_ms / 1000, f"{a.role} call starts"),
                  (end, f"{a.role} call ends")]
    for name, created, finished in tools.get(record.run_id, []):
        steps.append((created.timestamp(), f"tool {name} row created"))
        if finished is not None:
            steps.append((finished.timestamp(), f"tool {name} finished"))
    for node, kind, at in events.get(record.run_id, []):
        steps.append((at.timestamp(), f"event {node} {kind}"))
    steps.append((record.finished_at.timestamp(), "finished_at"))
    return {"run_id": record.run_id, "latency_s": round(median, 3),
            "steps_ms": [[round((t - origin) * 1000), what] for t, what in sorted(steps)]}


def _lease_settings() -> dict[str, Any]:
    from pipeline.config import VeritySettings

    settings = VeritySettings()
    return {"ttl_s": settings.lease_ttl_s, "renew_s": settings.lease_renew_s,
            "renewal": "one statement per worker process holding leases every renew_s"}


def worker_groups(spec: str) -> list[tuple[str, int]]:
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
            "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
            "max": round(ordered[-1], 3), "min": round(ordered[0], 3),
            "mean": round(statistics.fmean(ordered), 3)}


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
    sums: dict[str, int] = dict.fromkeys((*QUEUES, "unacked"), 0)
    samples = 0
    series: list[tuple[float, ...]] = []
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
                series.append((round(time.perf_counter() - start, 2),
                               *_sample_queues(broker, queues, sums)))
                samples += 1
            if done >= shown + max(runs // 10, 1):
                shown = done
                log(f"  {done}/{runs} ended after {time.perf_counter() - start:.1f}s")
            polls += 1
            time.sleep(POLL_S)
    elapsed = time.perf_counter() - start
    engine.dispose()
    broker.close()
    means = {name: round(total / samples, 1) if samples else 0.0 for name, total in sums.items()}
    return {"run_ids": run_ids, "elapsed_s": elapsed, "submit_s": submitted, "wall": wall,
            "last_finished_s": last.timestamp() - wall, "queues": queues, "mean_queues": means,
            "queue_series": series}


def _sample_queues(broker: Any, peaks: dict[str, int], sums: dict[str, int]) -> list[int]:
    """Raise `peaks` to the messages now waiting in each queue and held unacked by the worker
    (prefetched or running: acks are late); add them to `sums`; return them."""
    pipe = broker.pipeline(transaction=False)
    for queue in QUEUES:
        pipe.llen(queue)
    pipe.hlen("unacked")
    values = [int(value) for value in pipe.execute()]
    for name, value in zip((*QUEUES, "unacked"), values, strict=True):
        peaks[name] = max(peaks[name], value)
        sums[name] += value
    return values


if __name__ == "__main__":
    main()
