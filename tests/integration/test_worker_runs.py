"""Whole runs on real `verity worker` processes over real Redis and PostgreSQL."""

from __future__ import annotations

import json
import time

import pytest

from models.common import RunStatus
from models.invocation import LifecycleStatus
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore
from tests.integration.conftest import TENANT, Workers, assert_exactly_once, produce, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

CHECKOUT = str(default_scenarios_dir() / "checkout-pool-exhaustion")
QUESTION = "Why is checkout-service returning 500s?"


def _submit(env: dict[str, str], query: str = QUESTION, source: str = CHECKOUT) -> str:
    return produce(env, f"print(client.submit({query!r}, data_source={source!r}))")


def _terminal(store: RunStore, run_id: str, timeout: float = 60) -> None:
    wait_for(lambda: store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=timeout,
             what=f"run {run_id} to end")


def test_full_run(workers: Workers, runtime_env: dict[str, str], run_store: RunStore) -> None:
    workers.start()
    run_id = _submit(runtime_env)
    _terminal(run_store, run_id)
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS, run_store.events_since(run_id, tenant_id=TENANT)
    assert record.verdict is not None and record.verdict.value == "PASS"
    assert record.self_evaluation is not None and record.final_answer is not None
    allowed = record.self_evaluation.verifier_evaluation.claim_checks
    assert allowed and "v2.3.1" in record.final_answer.answer_summary
    nodes = [e.node for e in run_store.events_since(run_id, tenant_id=TENANT)]
    assert nodes[0] == "submit" and nodes[-1] == "finalize"
    assert {"plan", "execute", "gatekeep", "verify", "compose"} <= set(nodes)
    assert_exactly_once(run_store, run_id)
    # Each node task left PROGRESS meta (run id, node) in the result backend, for Flower and
    # result readers; node results themselves are not stored. Nor are tool results: the Redis
    # backend's chord counted them in its own set, and the run got past its chords without them.
    tool_id = f"{run_id}-tool-{run_store.list_invocations(run_id)[0].tool_call_id}"
    ids = [f"{run_id}-plan-0", f"{run_id}-gatekeep-{_version_of(run_store, run_id, 'gatekeep')}",
           tool_id]
    code = ("import json\nfrom tasks.app import app\n"
            f"print(json.dumps([[app.AsyncResult(i).state, app.AsyncResult(i).info] "
            f"for i in {ids!r}]))")
    progress = json.loads(produce(runtime_env, code))
    assert progress == [["PROGRESS", {"run_id": run_id, "node": "plan"}],
                        ["PROGRESS", {"run_id": run_id, "node": "gatekeep"}],
                        ["PENDING", None]]


def _version_of(store: RunStore, run_id: str, node: str) -> int:
    """The version a node ran at: the number of commits before its own."""
    commits = [e for e in store.events_since(run_id, tenant_id=TENANT)
               if e.kind in ("completed", "tool_calls") and e.node not in ("submit", "finalize")]
    return next(i for i, e in enumerate(commits) if e.node == node)


def test_a_worker_per_queue_group(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    """The README's production layout: model calls on one worker, control and tools on
    another; each consumes only its queues and has a node name of its own."""
    llm = workers.start(queues="llm", concurrency=6)
    short = workers.start(queues="control,tools", concurrency=3)
    run_ids = [_submit(runtime_env) for _ in range(2)]
    for run_id in run_ids:
        _terminal(run_store, run_id)
        assert run_store.get_run(run_id, tenant_id=TENANT).status is RunStatus.SUCCESS
        assert_exactly_once(run_store, run_id)
    llm_log, short_log = (workers.log_dir / f"worker-{i}.log" for i in range(2))
    ran_llm = llm_log.read_text()
    ran_short = short_log.read_text()
    assert f"verity-llm-{llm.pid}@" in ran_llm
    assert f"verity-control-tools-{short.pid}@" in ran_short
    for node in ("plan", "execute", "verify", "compose"):
        assert f"verity.node.{node}[" in ran_llm and f"verity.node.{node}[" not in ran_short
    for task in ("verity.node.tool[", "verity.node.gatekeep[", "verity.run.coordinate["):
        assert task in ran_short and task not in ran_llm


def test_producer_api_events_and_wait(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    workers.start()
    out = produce(runtime_env, (
        f"run_id = client.submit({QUESTION!r}, data_source={CHECKOUT!r})\n"
        "record = client.wait(run_id, timeout=60)\n"
        "events = client.events(run_id, after=2)\n"
        "import json\n"
        "print(json.dumps({'run_id': run_id, 'status': record.status.value,"
        " 'seqs': [e.seq for e in events]}))\n"
    ))
    result = json.loads(out)
    assert result["status"] == "SUCCESS"
    assert result["seqs"] and min(result["seqs"]) == 3
    assert result["seqs"] == sorted(result["seqs"])
    assert len(run_store.events_since(result["run_id"],
                                      tenant_id=TENANT)) == len(result["seqs"]) + 2


def test_cancel_mid_flight_releases_nothing(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    # long enough that the cancel (a new Python process) lands while the Verifier sleeps, on a
    # loaded machine too
    workers.start(faults="delay:verify=12")
    run_id = _submit(runtime_env)
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).node == "gatekeep", timeout=60,
             what="the Verifier to start")
    assert produce(runtime_env, f"print(client.cancel({run_id!r}))") == "True"
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.CANCELLED
    time.sleep(14)  # the Verifier's late result arrives now and must be discarded
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.CANCELLED
    assert record.final_answer is None and record.self_evaluation is None
    events = run_store.events_since(run_id, tenant_id=TENANT)
    cancelled = next(e.seq for e in events if e.kind == "cancelled")
    assert [e for e in events if e.seq > cancelled] == []
    assert not [e for e in events if e.node in ("verify", "compose", "finalize")]


def test_worker_killed_mid_node_finishes_once(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    first = workers.start(faults="delay:verify=3")
    run_id = _submit(runtime_env)
    wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).node == "gatekeep", timeout=60,
             what="the Verifier to start")
    time.sleep(1)
    workers.kill(first)  # SIGKILL in the middle of the verify node
    assert run_store.get_run(run_id, tenant_id=TENANT).status is RunStatus.RUNNING
    workers.start()
    _terminal(run_store, run_id, timeout=90)
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS
    assert_exactly_once(run_store, run_id)


def test_a_tool_that_raises_ends_error_not_a_crashed_run(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    workers.start(faults="raise:query_metrics")
    run_id = _submit(runtime_env)
    _terminal(run_store, run_id)
    record = run_store.get_run(run_id, tenant_id=TENANT)
    assert record.status in (RunStatus.SUCCESS, RunStatus.FALLBACK)
    failed = [i for i in run_store.list_invocations(run_id) if i.tool_name == "query_metrics"]
    assert failed and all(i.status is LifecycleStatus.ERROR for i in failed)
    assert all(i.error == "InjectedFaultError: injected tool failure" for i in failed)
    assert all(i.projection is None for i in failed)
    assert_exactly_once(run_store, run_id)


def test_evidence_retry_cycle_runs_exactly_once(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    workers.env = {**runtime_env,
                   "VERITY_RUNTIME_FACTORY": "tests.integration.retry_runtime:build"}
    workers.start()
    run_id = _submit(runtime_env)
    _terminal(run_store, run_id)
    record = run_store.get_run(run_id, tenant_id=TENANT)
    events = run_store.events_since(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.SUCCESS, events
    assert record.verdict is not None and record.verdict.value == "LOW_CONFID"
    assert [e.kind for e in events].count("evidence_retry") == 1
    plans = [e.payload for e in events if e.node == "plan"]
    assert [p["evidence_gap_only"] for p in plans] == [False, True]
    verifies = [e.payload["cycle"] for e in events if e.node == "verify" and
                e.kind == "completed"]
    assert verifies == [0, 1]
    cycles = sorted((a.role, a.cycle) for a in run_store.list_attempts(run_id))
    assert cycles == [("composer", 1), ("verifier", 0), ("verifier", 1)]
    assert record.evidence_retry_count == 1
    assert record.self_evaluation is not None
    evaluation = record.self_evaluation.verifier_evaluation
    assert evaluation.evidence_retry_count == 1
    assert_exactly_once(run_store, run_id)


def test_cli_run_enqueues_to_real_workers(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    import subprocess
    import sys

    from tests.integration.conftest import ROOT

    workers.start()
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "run", QUESTION, "--scenario",
         "checkout-pool-exhaustion", "--json"],
        cwd=ROOT, env=runtime_env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["verdict"]) == ("SUCCESS", "PASS")
    record = run_store.get_run(result["run_id"],
                               tenant_id=TENANT)  # stored in the workers' PostgreSQL
    assert record.status is RunStatus.SUCCESS
    worker_log = "\n".join(p.read_text() for p in workers.log_dir.glob("worker-*.log"))
    assert f"verity.node.plan[{result['run_id']}-plan-0] received" in worker_log


def test_the_evidence_retry_scenario_closes_its_gap_and_keeps_its_root_cause(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    """catalog-pricing-rate-limit: the offline Verifier finds the root cause resting on time
    alone (a critical query_metrics gap on pricing-api); the gap cycle queries it and the
    union of both cycles is PASS with the deploy confirmed."""
    workers.start()
    source = str(default_scenarios_dir() / "catalog-pricing-rate-limit")
    run_id = _submit(runtime_env, "Why is catalog-service returning 503s?", source)
    _terminal(run_store, run_id)
    record = run_store.get_run(run_id, tenant_id=TENANT)
    events = run_store.events_since(run_id, tenant_id=TENANT)
    assert (record.status, record.verdict and record.verdict.value) == (RunStatus.SUCCESS,
                                                                       "PASS"), events
    retry = [e.payload for e in events if e.kind == "evidence_retry"]
    assert retry == [{"gaps": 1, "cycle": 1}]
    first_verify = next(e.payload for e in events if e.node == "verify")
    assert first_verify["effective_verdict"] == "LOW_CONFID"
    assert record.evidence_retry_count == 1
    gap_calls = [i for i in run_store.list_invocations(run_id)
                 if i.arguments.get("service") == "pricing-api"]
    assert [i.tool_name for i in gap_calls] == ["query_metrics"]
    assert record.final_answer is not None and record.self_evaluation is not None
    summary = record.final_answer.answer_summary
    assert summary.startswith("Root cause: Deploy catalog-service v4.2.0")
    assert "pricing-api" in summary and "v2.8.0" not in summary and "v3.1.2" not in summary
    evaluation = record.self_evaluation.verifier_evaluation
    checks = {c.claim_id: c.verification.value for c in evaluation.claim_checks}
    # cycle one's claims are all still judged, and the gap cycle's were added beside them
    assert {"c1", "c2", "c3"} <= set(checks) and any(c.startswith("g1-") for c in checks)
    assert checks["c3"] in ("direct_observation", "reasonable_inference")
    assert not [g for g in evaluation.evidence_gaps if g.critical]
    assert_exactly_once(run_store, run_id)
