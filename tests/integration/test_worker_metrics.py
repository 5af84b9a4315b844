"""`verity worker --metrics-port N` without a multiprocess directory: the worker serves its own
Prometheus page, which counts the nodes and the end of a run it ran."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore
from tests.api.conftest import free_port
from tests.conftest import start_cli, stop_processes
from tests.integration.conftest import produce, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

QUESTION = "Why is checkout-service returning 500s?"


def test_a_worker__serves_its_own_metrics_on_its_port(
        runtime_env: dict[str, str], run_store: RunStore, tmp_path: Path) -> None:
    env = {k: v for k, v in runtime_env.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    port = free_port()
    worker = start_cli(["worker", "--concurrency", "2", "--queues", "control,llm,tools",
                        "--metrics-port", str(port)], env=env, ready=b"ready.",
                       what="worker", log=tmp_path / "worker.log")
    try:
        source = str(default_scenarios_dir() / "checkout-pool-exhaustion")
        run_id = produce(env, f"print(client.submit({QUESTION!r}, data_source={source!r}))")
        wait_for(lambda: run_store.get_head(run_id)[0].status.terminal, timeout=60,
                 what="the run's end")
        page = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        stop_processes([worker])
    ended = re.search(r'verity_runs_ended_total\{intent="DIAGNOSIS",status="SUCCESS",'
                      r'tenant="",verdict="PASS"\} (\S+)', page)
    assert ended is not None and float(ended.group(1)) == 1.0, page[-3000:]
    assert 'verity_node_duration_seconds_count{node="verify",outcome="committed"} 1.0' in page
