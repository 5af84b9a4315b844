"""Real worker processes on real Redis and PostgreSQL.

Each test gets its own PostgreSQL schema (from `postgres_url`) and its own Redis database
(flushed before and after), and starts `verity worker` as a separate process. The test
process talks to the workers the way a web app would: it enqueues with the producer API in a
subprocess and reads the store directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from models.invocation import LifecycleStatus
from pipeline.store import RunStore, open_store
from tests.conftest import own_redis_db, start_cli, stop_processes

ROOT = Path(__file__).resolve().parents[2]
TENANT = "team-a"
"""The producers' tenant (VERITY_TENANT): the owner of the runs they submit."""


@pytest.fixture
def redis_db_url(redis_url: str) -> Iterator[str]:
    """A Redis database of its own (1-12), empty before and after the test."""
    with own_redis_db(redis_url) as url:
        yield url


@pytest.fixture
def runtime_env(postgres_url: str, redis_db_url: str, tmp_path: Path) -> dict[str, str]:
    """Environment for workers and producers of one test."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {
        **clean,
        "VERITY_BROKER_URL": redis_db_url,
        "VERITY_RESULT_BACKEND": redis_db_url,
        "VERITY_DATABASE_URL": postgres_url,
        "VERITY_TENANT": TENANT,
        "VERITY_VISIBILITY_TIMEOUT": "3",
        # a dead copy's node lease must have expired when its message is redelivered
        "VERITY_LEASE_TTL_S": "1.5",
        "VERITY_LEASE_RENEW_S": "0.5",
        "VERITY_HOME": str(tmp_path / "home"),
    }


@dataclass
class Workers:
    """Worker processes started by a test, stopped at its end."""

    env: dict[str, str]
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, *, faults: str = "", concurrency: int = 4,
              queues: str = "control,llm,tools") -> subprocess.Popen[bytes]:
        """Start `verity worker` and wait until it consumes."""
        process = start_cli(
            ["worker", "--concurrency", str(concurrency), "--queues", queues,
             "--loglevel", "INFO"],
            env={**self.env, "VERITY_FAULTS": faults}, ready=b"ready.", what="worker",
            log=self.log_dir / f"worker-{len(self.processes)}.log")
        self.processes.append(process)
        return process

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no warm shutdown, unacked messages stay unacked."""
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def stop_all(self) -> None:
        """Warm shutdown of every live worker."""
        stop_processes(self.processes)


@pytest.fixture
def workers(runtime_env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    """Start workers with `workers.start()`; all are stopped after the test."""
    started = Workers(env=runtime_env, log_dir=tmp_path)
    yield started
    started.stop_all()


def produce(env: dict[str, str], code: str) -> str:
    """Run producer-API code in a fresh process (as a web app would); returns its stdout."""
    prelude = "from client import VerityClient\nclient = VerityClient.from_env()\n"
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.fixture
def run_store(runtime_env: dict[str, str]) -> Iterator[RunStore]:
    """The test's store, read directly."""
    with open_store(runtime_env["VERITY_DATABASE_URL"]) as store:
        yield store


def wait_for(predicate: object, *, timeout: float, what: str) -> None:
    """Poll `predicate()` until true."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def assert_exactly_once(store: RunStore, run_id: str) -> None:
    """Each tool call stored once and none left projecting, one finalize event, and each
    model attempt (role, cycle, number) stored once."""
    invocations = store.list_invocations(run_id)
    ids = [i.tool_call_id for i in invocations]
    assert len(ids) == len(set(ids))
    assert all(i.status is not LifecycleStatus.PROJECTING for i in invocations)
    events = store.events_since(run_id, tenant_id=TENANT)
    finals = [e for e in events if e.node == "finalize"]
    assert len(finals) == 1, finals
    attempts = Counter((a.role, a.cycle, a.attempt_number) for a in store.list_attempts(run_id))
    assert all(n == 1 for n in attempts.values())
