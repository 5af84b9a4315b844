"""Flower, pointed at the broker, lists a run's tasks by their readable names."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.store import RunStore
from tests.integration.conftest import ROOT, TENANT, Workers, produce, wait_for
from tests.integration.test_worker_runs import CHECKOUT, QUESTION

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

EXPECTED = {
    "verity.run.coordinate", "verity.node.plan", "verity.node.execute", "verity.node.tool",
    "verity.node.gatekeep", "verity.node.verify", "verity.node.compose",
    "verity.node.finalize",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:  # loopback only
        return json.loads(response.read())


def test_flower_lists_run_tasks_by_readable_name(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore, tmp_path: Path
) -> None:
    port = _free_port()
    env = {**runtime_env, "FLOWER_UNAUTHENTICATED_API": "true"}
    log = (tmp_path / "flower.log").open("wb")
    flower = subprocess.Popen(
        [sys.executable, "-m", "celery", "--app", "tasks.app", "flower",
         f"--port={port}", "--address=127.0.0.1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: _answers(port), timeout=30, what="Flower to listen")
        workers.start()
        code = f"print(client.submit({QUESTION!r}, data_source={CHECKOUT!r}))"
        run_id = produce(runtime_env, code)
        wait_for(lambda: run_store.get_run(run_id, tenant_id=TENANT).status.terminal, timeout=60,
                 what="the run")
        time.sleep(1)  # let the last task events reach Flower
        tasks = _get(f"http://127.0.0.1:{port}/api/tasks?limit=500")
        assert isinstance(tasks, dict)
        mine = [t for t in tasks.values() if run_id in str(t.get("args", ""))
                or str(t.get("uuid", "")).startswith(run_id)]
        names = {t.get("name") for t in mine}
        assert EXPECTED <= names, names
        states = {t.get("state") for t in mine}
        assert states == {"SUCCESS"}, states
    finally:
        flower.terminate()
        flower.wait(10)
        log.close()


def _answers(port: int) -> bool:
    try:
        _get(f"http://127.0.0.1:{port}/api/workers?refresh=false")
    except OSError:
        return False
    return True
