"""The seven drills of issue 10, each a function of a fresh `Cluster` returning the batch's
`Audit` (its `problems()` are what the tests assert, its `summary()` what the bench prints).

Each submits at least 50 runs over the shipped scenarios, injects its fault mid-batch, drains
with a bounded deadline and audits: every run terminal, ended once, no duplicate tool rows, one
`llm_attempt` row per request the fake server saw.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.chaos.audit import Audit
from tests.chaos.faulty_runtime import ROLES, marker
from tests.chaos.harness import Cluster, wait_until

RUNS = 50
KNOWLEDGE = "knowledge-payment-db-credentials"


def scenario_jobs(runs: int, *, knowledge: bool = True) -> list[tuple[str, str]]:
    """`runs` (question, scenario folder) pairs cycling over the shipped scenarios."""
    from pipeline.scenarios import default_scenarios_dir, load_scenario

    folders = sorted(p for p in default_scenarios_dir().iterdir()
                     if (p / "scenario.json").is_file() and (knowledge or p.name != KNOWLEDGE))
    pairs = [(load_scenario(p).meta.question, str(p)) for p in folders]
    return [pairs[i % len(pairs)] for i in range(runs)]


def _finish(cluster: Cluster, run_ids: list[str], *, since: float, timeout: float,
            **extra: Any) -> Audit:
    drained = cluster.drain(run_ids, timeout=timeout, since=since)
    audit = cluster.audit(run_ids, drain_time_s=drained)
    health = cluster.reconciler_health()
    audit.extra.update(extra, reconcilers=health)
    audit.expect(all(r["alive"] for r in health), f"a reconciler died: {health}")
    return audit


def _standard_workers(cluster: Cluster, count: int = 2, concurrency: int = 4) -> str:
    for _ in range(count):
        cluster.workers.start(concurrency=concurrency)
    return cluster.start_reconciler()


# -- infrastructure faults ---------------------------------------------------------------------


def redis_restart(cluster: Cluster, *, runs: int = RUNS, drain_s: float = 120) -> Audit:
    """Redis SIGKILLed once a fifth of the batch has ended, restarted empty 2 s later."""
    reconciler = _standard_workers(cluster)
    run_ids = cluster.submit(scenario_jobs(runs))
    cluster.wait_progress(run_ids, ended=runs // 5, timeout=90)
    ended_at_fault = cluster.count(run_ids)
    cluster.redis.kill()
    down = time.monotonic()
    producer = _submit_attempt(cluster, scenario_jobs(1)[0][1])
    time.sleep(max(0.0, 2 - (time.monotonic() - down)))
    cluster.redis.start()
    since = time.monotonic()
    audit = _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler,
                    ended_before_fault=ended_at_fault, redis_down_s=round(since - down, 1),
                    submit_while_down=producer)
    audit.expect(producer["raised"] is not None and producer["raised"]["verity"]
                 and producer["rows_left"] == 0,
                 f"a submit while Redis was down: {producer}")
    return audit


def postgres_outage(cluster: Cluster, *, runs: int = RUNS, outage_s: float = 45,
                    drain_s: float = 150) -> Audit:
    """PostgreSQL stopped (fast: backends terminated) for `outage_s` once a fifth of the batch
    has ended, then started again on the same port."""
    reconciler = _standard_workers(cluster)
    run_ids = cluster.submit(scenario_jobs(runs))
    cluster.wait_progress(run_ids, ended=runs // 5, timeout=90)
    ended_at_fault = cluster.count(run_ids)
    cluster.postgres.stop("fast")
    time.sleep(outage_s)
    cluster.postgres.start()
    since = time.monotonic()
    return _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler,
                   ended_before_fault=ended_at_fault, outage_s=outage_s)


def worker_kills(cluster: Cluster, *, runs: int = RUNS, kills: int = 5, every_s: float = 2.5,
                 latency: float = 0.3, drain_s: float = 120) -> Audit:
    """Three workers on every queue, Claude agents on the fake server at `latency` s a call;
    every `every_s` one worker (in turn) is SIGKILLed and replaced, `kills` times."""
    fake = cluster.use_fake(latency=latency)
    pool = [cluster.workers.start(concurrency=6) for _ in range(3)]
    reconciler = cluster.start_reconciler()
    run_ids = cluster.submit(scenario_jobs(runs))
    since = time.monotonic()
    kill_times: list[float] = []
    for round_ in range(kills):
        time.sleep(every_s)
        index = round_ % len(pool)
        kill_times.append(time.time())
        pool[index] = cluster.workers.restart(pool[index], wait=False)
    for process in pool:
        cluster.workers.wait_ready(process)
    audit = _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler,
                    kills=len(kill_times))
    in_flight = [r for r in fake.requests if any(r["time"] <= k < r["time"] + latency + 0.05
                                                 for k in kill_times)]
    audit.extra["requests_in_flight_at_kills"] = dict(Counter(r["role"] for r in in_flight))
    return audit


# -- run faults --------------------------------------------------------------------------------


def bad_data_source(cluster: Cluster, *, runs: int = RUNS, drain_s: float = 90) -> Audit:
    """Every run gets its own copy of a scenario; after submit (before any worker runs) a third
    of the copies are deleted and a third have `scenario.json` overwritten with garbage."""
    sources = cluster.log_dir / "sources"
    jobs = []
    for i, (question, folder) in enumerate(scenario_jobs(runs)):
        copy = sources / f"{i:03d}-{Path(folder).name}"
        shutil.copytree(folder, copy)
        jobs.append((question, str(copy)))
    run_ids = cluster.submit(jobs)
    kinds = {}
    for i, (run_id, (_, folder)) in enumerate(zip(run_ids, jobs, strict=True)):
        kind = ("deleted", "corrupt", "intact")[i % 3]
        if kind == "deleted":
            shutil.rmtree(folder)
        elif kind == "corrupt":
            (Path(folder) / "scenario.json").write_text("{ not json", encoding="utf-8")
        kinds[run_id] = kind
    producer = _producer_rejections(cluster)
    since = time.monotonic()
    reconciler = _standard_workers(cluster)
    audit = _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler,
                    producer_side=producer)
    status = dict(cluster.query("SELECT run_id, status FROM diagnosis_run "
                                "WHERE run_id = ANY(%s)", (run_ids,)))
    by_kind: dict[str, Counter[str]] = {}
    for run_id, kind in kinds.items():
        by_kind.setdefault(kind, Counter())[status.get(run_id, "missing")] += 1
    audit.extra["ended_by_source"] = {k: dict(v) for k, v in sorted(by_kind.items())}
    broken = [r for r, kind in kinds.items() if kind != "intact"]
    rows = cluster.query("SELECT status, error FROM tool_invocation WHERE run_id = ANY(%s)",
                         (broken,))
    errors = sorted({e for _, e in rows if e})
    audit.extra["broken_source_tools"] = {"statuses": dict(Counter(s for s, _ in rows)),
                                          "errors": errors[:4]}
    audit.expect(all(s == "ERROR" for s, _ in rows),
                 "a tool of a broken source did not end ERROR")
    audit.expect(all("\n" not in e and len(e) <= 500 for e in errors),
                 "a broken source's tool error is not one clean line")
    audit.expect(set(by_kind["intact"]) == {"SUCCESS"},
                 f"intact sources did not all succeed: {dict(by_kind['intact'])}")
    audit.expect(all(p["raised"] is not None and p["raised"]["verity"] and p["rows_left"] == 0
                     for p in producer.values()),
                 f"submit accepted a source that is not one: {producer}")
    return audit


def _producer_rejections(cluster: Cluster) -> dict[str, Any]:
    """What `submit` does with no data source and with a path that is not a scenario."""
    return {"none": _submit_attempt(cluster, None),
            "missing": _submit_attempt(cluster, "/nonexistent/chaos-scenario")}


def _submit_attempt(cluster: Cluster, source: str | None) -> dict[str, Any]:
    """One `submit` expected to be refused: the exception it raised (None: it accepted the
    run) and the rows it left behind."""
    count = "SELECT count(*) FROM diagnosis_run"
    before = cluster.query(count)[0][0]
    code = (
        "from pipeline.errors import VerityError\n"
        "try:\n"
        f"    client.submit('Why is checkout-service returning 500s?', data_source={source!r})\n"
        "    out = None\n"
        "except Exception as exc:\n"
        "    out = {'error': type(exc).__name__, 'verity': isinstance(exc, VerityError),"
        " 'message': str(exc)[:200]}\n"
        "print(json.dumps(out)); sys.stdout.flush(); os._exit(0)\n"
    )
    raised = json.loads(cluster._produce(code, timeout=90))
    return {"raised": raised, "rows_left": cluster.query(count)[0][0] - before}


def node_raises(cluster: Cluster, *, runs: int = RUNS, drain_s: float = 90) -> Audit:
    """A runtime whose planner, executor, verifier or composer raises a plain exception (a
    bug) in the runs marked for it; a fifth of the batch is left unmarked."""
    cluster.env["VERITY_RUNTIME_FACTORY"] = "tests.chaos.faulty_runtime:build"
    reconciler = _standard_workers(cluster)
    kinds = [*ROLES, None]
    jobs, planned = [], []
    for i, (question, folder) in enumerate(scenario_jobs(runs, knowledge=False)):
        role = kinds[i % len(kinds)]
        jobs.append((f"{question} {marker(role)}" if role else question, folder))
        planned.append(role or "none")
    run_ids = cluster.submit(jobs)
    since = time.monotonic()
    audit = _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler)
    status = dict(cluster.query("SELECT run_id, status FROM diagnosis_run "
                                "WHERE run_id = ANY(%s)", (run_ids,)))
    by_role: dict[str, Counter[str]] = {}
    for run_id, role in zip(run_ids, planned, strict=True):
        by_role.setdefault(role, Counter())[status.get(run_id, "missing")] += 1
    audit.extra["ended_by_raising_role"] = {k: dict(v) for k, v in sorted(by_role.items())}
    audit.expect(set(by_role["none"]) == {"SUCCESS"},
                 f"unmarked runs did not all succeed: {dict(by_role['none'])}")
    return audit


def duplicate_tool_use(cluster: Cluster, *, runs: int = RUNS, drain_s: float = 90) -> Audit:
    """Claude agents on the fake server, whose Executor asks for two different calls under one
    tool_use id in its first turn: the first call's row must stand, never overwritten."""
    fake = cluster.use_fake(
        responders={"executor": "tests.chaos.responders:executor_duplicate_ids"})
    reconciler = _standard_workers(cluster, concurrency=6)
    run_ids = cluster.submit(scenario_jobs(runs, knowledge=False))
    since = time.monotonic()
    audit = _finish(cluster, run_ids, since=since, timeout=drain_s, reconciler=reconciler)
    first: dict[str, tuple[str, Any]] = {}
    for request in fake.requests_for("executor"):
        blocks = (request.get("response") or {}).get("content") or []
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        if len(uses) >= 2 and uses[0]["id"] == uses[1]["id"]:
            first[uses[0]["id"]] = (uses[0]["name"], uses[0]["input"])
    rows = cluster.query("SELECT tool_call_id, tool_name, arguments, status FROM "
                         "tool_invocation WHERE tool_call_id = ANY(%s)", (list(first),))
    kept_first = sum(1 for tcid, name, arguments, _ in rows
                     if (name, arguments) == first[tcid])
    refused = _refused_ids(cluster, fake, list(first))
    audit.extra["duplicate_ids_sent"] = len(first)
    audit.extra["duplicate_ids_refused"] = {k: len(v) for k, v in refused.items()}
    audit.extra["duplicate_id_rows"] = {"rows": len(rows), "first_call_kept": kept_first,
                                        "statuses": dict(Counter(r[3] for r in rows))}
    audit.expect(len(first) == runs, f"the fake sent {len(first)} duplicate ids, not {runs}")
    audit.expect(kept_first == len(rows) == len(first),
                 f"{len(rows)} rows for {len(first)} duplicated ids, {kept_first} keep the "
                 "first call")
    told = refused["to_the_model"] | refused["by_an_event"]
    audit.expect(told == set(first),
                 f"{len(set(first) - told)} duplicated ids refused neither to the model "
                 "(an is_error tool_result naming the id) nor by an event")
    return audit


def _refused_ids(cluster: Cluster, fake: Any, ids: list[str]) -> dict[str, set[str]]:
    """The duplicated ids the run refused: named in an `is_error` tool_result sent back to the
    model, or in a `duplicate_tool_call` event."""
    wanted = set(ids)
    told: set[str] = set()
    for request in fake.requests_for("executor"):
        for message in request["body"]["messages"]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result" and block.get("is_error"):
                    text = json.dumps(block.get("content"))
                    told |= {i for i in wanted if f"duplicate tool_call_id {i}" in text}
    events = cluster.query("SELECT payload FROM run_event WHERE kind = 'duplicate_tool_call'")
    logged = {str(p.get("tool_call_id")) for (p,) in events} & wanted
    return {"to_the_model": told, "by_an_event": logged}


def cancel_during_model_call(cluster: Cluster, *, runs: int = RUNS, hold_s: float = 30,
                             probes: int = 10, probe_s: float = 10) -> Audit:
    """Every run's Verifier call held `hold_s` by the fake server; all runs are cancelled once
    every one is inside it. The calls must be aborted within about a second: a probe batch
    (Verifier no longer held) then finishes on the same threads well before the hold ends,
    and every aborted call is an `llm_attempt` row."""
    fake = cluster.use_fake(role_latency={"verifier": hold_s})
    cluster.env["VERITY_VISIBILITY_TIMEOUT"] = str(int(hold_s * 4))
    cluster.workers.start(concurrency=runs, queues="llm")
    cluster.workers.start(concurrency=8, queues="control,tools")
    reconciler = cluster.start_reconciler()
    run_ids = cluster.submit(scenario_jobs(runs, knowledge=False))
    wait_until(lambda: len(fake.requests_for("verifier")) >= runs, timeout=120, poll=0.25,
               what=f"{runs} Verifier calls in flight")
    said = cluster.cancel(run_ids)
    fake.set_latency(0.0, "verifier")
    since = time.monotonic()
    probe_ids = cluster.submit(scenario_jobs(probes, knowledge=False))
    probe_drain = cluster.drain(probe_ids, timeout=hold_s + 30)
    everything = [*run_ids, *probe_ids]
    drained = cluster.drain(everything, timeout=hold_s + 30, since=since)
    late = _settle_attempts(cluster, run_ids, runs=runs, timeout=hold_s + 10)
    audit = cluster.audit(everything, drain_time_s=drained)
    audit.extra.update({"reconciler": reconciler, "cancel": said,
                        "reconcilers": cluster.reconciler_health()})
    # an aborted call's row is dated when the call ended; the run's finished_at, when the
    # cancel ended it
    aborts = [(ended - cancelled).total_seconds() for ended, cancelled in cluster.query(
        "SELECT a.created_at, r.finished_at FROM llm_attempt a JOIN diagnosis_run r "
        "USING (run_id) WHERE a.role = 'verifier' AND r.run_id = ANY(%s)", (run_ids,))]
    audit.extra.update({
        "probe_drain_s": probe_drain, "verifier_attempt_rows_of_cancelled": late,
        "abort_after_cancel_s": _spread(aborts)})
    cancelled = cluster.query("SELECT count(*) FROM diagnosis_run WHERE run_id = ANY(%s) "
                              "AND status = 'CANCELLED'", (run_ids,))[0][0]
    audit.expect(cancelled == runs, f"{cancelled} of {runs} runs CANCELLED")
    audit.expect(0 <= probe_drain <= probe_s,
                 f"the probe batch took {probe_drain}s (threads held by aborted calls?)")
    audit.expect(bool(aborts) and max(aborts) <= 1.5,
                 f"aborted calls recorded {_spread(aborts)} s after the cancel")
    return audit


def _settle_attempts(cluster: Cluster, run_ids: list[str], *, runs: int,
                     timeout: float) -> int:
    """Wait (bounded) until the cancelled runs' Verifier calls are attempt rows; how many."""
    def rows() -> int:
        return int(cluster.query("SELECT count(*) FROM llm_attempt WHERE role = 'verifier' "
                                 "AND run_id = ANY(%s)", (run_ids,))[0][0])

    deadline = time.monotonic() + timeout
    while rows() < runs and time.monotonic() < deadline:
        time.sleep(0.5)
    return rows()


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50": round(statistics.median(values), 2), "max": round(max(values), 2),
            "min": round(min(values), 2)}


DRILLS: dict[str, Callable[..., Audit]] = {
    "redis_restart": redis_restart,
    "postgres_outage": postgres_outage,
    "worker_kills": worker_kills,
    "bad_data_source": bad_data_source,
    "node_raises": node_raises,
    "duplicate_tool_use": duplicate_tool_use,
    "cancel_during_model_call": cancel_during_model_call,
}
"""Every drill by name, in the order the bench runs them."""
