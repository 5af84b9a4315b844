"""The HTTP API over real HTTP: `verity serve` on a free port, `verity worker` processes on real
Redis and PostgreSQL, and Claude agents pointed at the fake Anthropic server (in its own
process) whose per-role latency a test can hold.

One world per module (a PostgreSQL schema, a Redis database, the fake, two workers and the
server), shared by its tests; each test acts through tokens of tenants of its own. Missing
services skip, and fail under CI=true (`tests/conftest.py`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from pipeline.store import open_store
from pipeline.tokens import hash_secret, new_secret, new_token_id
from tests.chaos.harness import spawn_fake
from tests.conftest import fresh_schema, own_redis_db, start_cli, stop_processes

ROOT = Path(__file__).resolve().parents[2]
RUNS_PER_MINUTE = 3
"""The server's rate limit: a test creates at most this many runs per token, but the rate test."""
MAX_BODY = 4096


TERMINAL = {"SUCCESS", "FALLBACK", "FAILED", "CANCELLED"}


def wait_for_run(http: httpx.Client, run_id: str, *, timeout: float = 60) -> dict[str, Any]:
    """The run as `GET /runs/{id}` answers once it has ended (AssertionError after
    `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        record: dict[str, Any] = http.get(f"/runs/{run_id}").json()
        if record["status"] in TERMINAL:
            return record
        assert time.monotonic() < deadline, f"run {run_id} still {record['status']}"
        time.sleep(0.1)


def free_port() -> int:
    """A port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class World:
    """The module's server, workers and fake, and how to reach them."""

    base_url: str
    env: dict[str, str]
    database_url: str
    fake: Any
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def token(self, tenant: str | None = None) -> str:
        """A fresh token's secret, of `tenant` (a new tenant by default)."""
        secret = new_secret()
        with open_store(self.database_url) as store:
            store.create_token(token_id=new_token_id(),
                               tenant_id=tenant or f"t-{uuid.uuid4().hex[:8]}",
                               name="test", secret_sha256=hash_secret(secret))
        return secret

    def http(self, secret: str | None = None, **kwargs: Any) -> httpx.Client:
        """An HTTP client of the server, with the token when given."""
        headers = {"authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30, **kwargs)

    def query(self, sql: str, **params: Any) -> list[Any]:
        """Rows of a read on the module's database."""
        engine = create_engine(self.database_url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                return list(connection.execute(text(sql), params))
        finally:
            engine.dispose()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`verity ARGS` against the module's database."""
        return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=60, check=False)

    def start(self, name: str, *args: str, ready: bytes) -> None:
        self.processes.append(start_cli(list(args), env=self.env, what=name, ready=ready,
                                        log=self.log_dir / f"{name}.log"))

    def stop(self) -> None:
        stop_processes(self.processes)


@pytest.fixture(scope="module")
def database_url_module(postgres_server_url: str) -> Iterator[str]:
    """A PostgreSQL schema of the module's own, dropped afterwards."""
    with fresh_schema(postgres_server_url, "verity_api") as url:
        open_store(url).close()  # migrated before the processes start
        yield url


@pytest.fixture(scope="module")
def world(database_url_module: str, redis_url: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Server, workers and fake of the module."""
    with own_redis_db(redis_url) as redis_db:
        yield from _world(database_url_module, redis_db, tmp_path_factory)


def _world(database_url_module: str, redis_db: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    fake = spawn_fake()
    log_dir = tmp_path_factory.mktemp("api")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    port = free_port()
    env = {
        **clean,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH")])),
        "VERITY_BROKER_URL": redis_db, "VERITY_RESULT_BACKEND": redis_db,
        "VERITY_DATABASE_URL": database_url_module, "VERITY_HOME": str(log_dir / "home"),
        "VERITY_VISIBILITY_TIMEOUT": "120", "VERITY_LEASE_TTL_S": "1.5",
        "VERITY_LEASE_RENEW_S": "0.5",
        "VERITY_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "test",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "VERITY_API_RUNS_PER_MINUTE": str(RUNS_PER_MINUTE),
        "VERITY_API_MAX_BODY_BYTES": str(MAX_BODY), "VERITY_API_KEEPALIVE_S": "1",
    }
    found = World(base_url=f"http://127.0.0.1:{port}", env=env, database_url=database_url_module,
                  fake=fake, log_dir=log_dir)
    try:
        found.start("worker-llm", "worker", "--queues", "llm", "--concurrency", "4",
                    ready=b"ready.")
        found.start("worker-rest", "worker", "--queues", "control,tools,batch",
                    "--concurrency", "4", ready=b"ready.")
        found.start("serve", "serve", "--port", str(port), ready=b"Verity on http")
        yield found
    finally:
        found.stop()
        fake.stop()
