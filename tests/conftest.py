"""Shared fixtures: database URLs for SQLite and PostgreSQL, Redis, and an open RunStore.

Services: PostgreSQL (`VERITY_TEST_POSTGRES_URL`, default the local `test` database) and Redis
(`VERITY_TEST_REDIS_URL`). A missing service skips its tests, except under CI (`CI=true`),
where it fails them: a suite that silently skips its backends proves nothing.

PostgreSQL isolation: every test gets its own schema (`verity_test_<random>`), selected with
`options=-csearch_path=<schema>` on the URL and dropped afterwards, so tests never see each
other's rows and concurrent runs of the suite never collide.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from pipeline.store import PostgresStore, RunStore, SqliteStore, open_store

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True, scope="session")
def _no_user_sources_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite never reads the developer's sources file (`~/.config/verity/config.toml`):
    XDG_CONFIG_HOME points at an empty folder and VERITY_CONFIG is unset unless a test sets
    it (subprocesses inherit both)."""
    saved = {k: os.environ.get(k) for k in ("XDG_CONFIG_HOME", "VERITY_CONFIG")}
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    os.environ.pop("VERITY_CONFIG", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _service_missing(name: str, reason: str) -> None:
    """Skip, or fail under CI: a missing service must fail the suite there."""
    message = f"{name} not reachable: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The PostgreSQL server URL, checked once per session."""
    url = os.environ.get("VERITY_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    engine = create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except OperationalError as exc:
        _service_missing("PostgreSQL", str(exc.orig).strip().splitlines()[0])
    finally:
        engine.dispose()
    return url


@contextmanager
def fresh_schema(server_url: str, prefix: str = "verity_test") -> Iterator[str]:
    """A URL whose connections use a new PostgreSQL schema, dropped on exit."""
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server_url, poolclass=NullPool)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A URL whose connections use a fresh schema, dropped after the test."""
    with fresh_schema(postgres_server_url) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file in a directory the store has to create."""
    return f"sqlite:///{tmp_path / 'data' / 'verity.db'}"


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The Redis URL, checked with a PING."""
    url = os.environ.get("VERITY_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), 3) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(64)
    except OSError as exc:
        _service_missing("Redis", str(exc))
    # A password-protected server answers -NOAUTH: it is there, the URL carries the password.
    if not reply.startswith((b"+PONG", b"-NOAUTH")):
        _service_missing("Redis", f"unexpected reply {reply!r}")
    return url


@contextmanager
def own_redis_db(redis_url: str, *, wait_s: float = 120.0) -> Iterator[str]:
    """A Redis database (1-12) no other test holds, empty on entry and on exit.

    Two suites may run on one machine at once (a developer's and a fresh clone's CI): each
    claims its database with a key in database 0 (`SET NX` with an expiry, so a killed suite
    frees it) rather than drawing one at random and flushing the other's queues."""
    import random

    import redis

    base = redis_url.rsplit("/", 1)[0]
    registry = redis.Redis.from_url(f"{base}/0")
    token = uuid.uuid4().hex
    numbers = list(range(1, 13))  # 13-15 are left to the benchmarks
    deadline = time.monotonic() + wait_s
    claimed = None
    try:
        while claimed is None:
            random.shuffle(numbers)
            claimed = next((n for n in numbers
                            if registry.set(f"verity:test-redis-db:{n}", token, nx=True, ex=3600)),
                           None)
            if claimed is None:
                if time.monotonic() > deadline:
                    pytest.fail("no free Redis database (1-12) for the test", pytrace=False)
                time.sleep(0.5)
        url = f"{base}/{claimed}"
        client = redis.Redis.from_url(url)
        client.flushdb()
        try:
            yield url
        finally:
            client.flushdb()
            client.close()
    finally:
        key = f"verity:test-redis-db:{claimed}"
        if claimed is not None and registry.get(key) == token.encode():
            registry.delete(key)
        registry.close()


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def database_url(request: pytest.FixtureRequest) -> str:
    """A fresh, empty database URL on each backend."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(name)
    return url


def _opener(backend: type[RunStore]) -> Callable[[str], RunStore]:
    def open_backend(url: str) -> RunStore:
        opened = open_store(url)
        assert isinstance(opened, backend), f"{url} opened a {type(opened).__name__}"
        return opened
    return open_backend


STORE_FACTORIES: dict[str, Callable[[str], RunStore]] = {
    "sqlite": _opener(SqliteStore),
    "postgres": _opener(PostgresStore),
}
"""How the conformance suite opens a store on each backend (by `database_url`'s id): every
test that takes `store` runs once per entry."""


@pytest.fixture
def store(database_url: str, request: pytest.FixtureRequest) -> Iterator[RunStore]:
    """An open RunStore on a fresh database, on each backend; a test marked
    `requires(capability, ...)` is skipped on a backend that does not declare them all."""
    with STORE_FACTORIES[request.node.callspec.params["database_url"]](database_url) as opened:
        marker = request.node.get_closest_marker("requires")
        missing = set(marker.args if marker else ()) - set(opened.capabilities)
        if missing:
            pytest.skip(f"the {type(opened).__name__} lacks {', '.join(sorted(missing))}")
        yield opened


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its VERITY_* and ANTHROPIC_* settings, with
    VERITY_HOME at `home`, and `extra`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {**clean, "VERITY_HOME": str(home), **extra}


def run_verity(*args: str, env: dict[str, str], stdin: str | None = None,
               timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    """`verity ARGS` run to its end in the repository root: its exit code, stdout and stderr."""
    return subprocess.run([sys.executable, "-m", "cli.main", *args], input=stdin, cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout_s,
                          check=False)


def start_cli(args: list[str], *, env: dict[str, str], log: Path, ready: bytes,
              what: str, timeout_s: float = 30) -> subprocess.Popen[bytes]:
    """`verity ARGS` as a process of its own, its output in `log`; returns once `ready`
    appears there (AssertionError with the log's tail if it exits or times out first; the
    process is stopped then)."""
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=ROOT,
                                   env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while ready not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_processes([process])
            raise AssertionError(f"{what} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    return process


def stop_processes(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a warm shutdown) to every live process, then SIGKILL any still up after 15 s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
