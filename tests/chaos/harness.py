"""The chaos drills' machinery: a private Redis and PostgreSQL, worker processes, the fake
Anthropic server, a batch of runs and the audit of how the batch ended.

Everything runs on free ports of 127.0.0.1 in temporary folders, so killing a service harms
nothing else (the shared 5432/6379 are never touched). Shared by `tests/chaos/` and
`bench/chaos.py`:

    with Cluster.start(log_dir) as cluster:          # Redis + PostgreSQL, a fresh database
        cluster.workers.start(concurrency=4)         # `verity worker` processes
        run_ids = cluster.submit([(query, source)] * 50)
        cluster.redis.kill(); cluster.redis.start()  # the fault
        drained = cluster.drain(run_ids, timeout=90)
        audit = cluster.audit(run_ids, drained)      # stuck, duplicates, attempts vs requests

Every process started is ended by the `with`, also when the drill fails; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.chaos.audit import Audit, audit_batch

ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ("SUCCESS", "FALLBACK", "FAILED", "CANCELLED")


class MissingBinaryError(RuntimeError):
    """redis-server, initdb or pg_ctl is not installed."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str,
               poll: float = 0.1) -> None:
    """Poll `predicate()` until true; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(poll)


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# -- Redis -------------------------------------------------------------------------------------


def redis_binary() -> str:
    """The redis-server executable."""
    found = shutil.which("redis-server")
    if found is None:
        raise MissingBinaryError("redis-server is not installed")
    return found


class RedisServer:
    """`redis-server` without persistence as a child process; killed and restarted on the same
    port, it comes back empty (as the machine's own Redis does)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.log = workdir / f"redis-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 15) -> None:
        """Start (again) on this port and wait for a PONG."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("redis-server is already running")
        command = [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--daemonize", "no",
                   "--dir", str(self.workdir), "--logfile", str(self.log)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(self.ping, timeout=timeout, what=f"redis-server on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), 1) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: every queued and unacked message and every chord counter is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def flushall(self) -> None:
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port)
        try:
            client.flushall()
        finally:
            client.close()


# -- PostgreSQL --------------------------------------------------------------------------------


def postgres_bin_dir() -> Path:
    """The newest /usr/lib/postgresql/*/bin with initdb and pg_ctl (else those on PATH)."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    for directory in reversed(candidates):
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl and Path(initdb).parent == Path(pg_ctl).parent:
        return Path(initdb).parent
    raise MissingBinaryError("initdb and pg_ctl are not installed (/usr/lib/postgresql/*/bin)")


class PostgresServer:
    """A PostgreSQL cluster of its own: `initdb` into a temporary folder owned by the
    `postgres` user (the server refuses to run as root), trust auth, fsync off, listening on
    127.0.0.1:<port> only; stopped and started again on the same port."""

    def __init__(self, port: int | None = None) -> None:
        self.bin = postgres_bin_dir()
        self.port = port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="verity-chaos-pg-"))
        self.data = self.workdir / "data"
        self.log = self.workdir / "postgres.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.workdir, owner.pw_uid, owner.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self.running = False

    def _run(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run([*self._as_user, *args], capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.workdir)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout)[-2000:]}\n{_log_tail(self.log)}")

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")

    def start(self) -> None:
        """Start (again) and wait until it accepts connections."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.workdir} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=400")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-o", options, "-w", "-t", "60", "start", timeout=90)
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """`pg_ctl stop -m fast` (backends terminated, connections refused until started) or
        `immediate`."""
        if self.running:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                      "-t", "60", "stop", timeout=90)
            self.running = False

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database} connect_timeout=3"

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')

    def destroy(self) -> None:
        """Stop (immediate) and remove the cluster's folder."""
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)


# -- workers and the fake server ---------------------------------------------------------------


def _cli_help(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "cli.main", *args, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "COLUMNS": "200"})
    return done.stdout if done.returncode == 0 else ""


_FEATURES: dict[str, bool] = {}


def cli_has(feature: str) -> bool:
    """Whether this tree's `verity` offers `reconcile` (a command) or `beat` (a worker
    option); asked once per process."""
    if feature not in _FEATURES:
        if feature == "reconcile":
            _FEATURES[feature] = bool(_cli_help("reconcile"))
        elif feature == "beat":
            _FEATURES[feature] = "--beat" in _cli_help("worker")
        else:
            raise ValueError(feature)
    return _FEATURES[feature]


@dataclass
class Workers:
    """`verity worker` processes of one drill: started, SIGKILLed, restarted, all ended."""

    env: dict[str, str]
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    _specs: dict[int, dict[str, Any]] = field(default_factory=dict)

    def start(self, *, concurrency: int = 4, queues: str = "control,llm,tools",
              beat: bool = False, env: dict[str, str] | None = None,
              wait: bool = True) -> subprocess.Popen[bytes]:
        """Start one `verity worker`; with `wait`, until it consumes ("ready.")."""
        log = self.log_dir / f"worker-{len(self.processes)}.log"
        command = [sys.executable, "-m", "cli.main", "worker", "--concurrency",
                   str(concurrency), "--queues", queues, "--loglevel", "INFO"]
        if beat:
            command.append("--beat")
        with log.open("wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, env={**self.env, **(env or {})},
                                       stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes.append(process)
        self.logs.append(log)
        self._specs[process.pid] = {"concurrency": concurrency, "queues": queues,
                                    "beat": beat, "env": env}
        if wait:
            self.wait_ready(process)
        return process

    def wait_ready(self, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
        log = self.logs[self.processes.index(process)]
        wait_until(lambda: b"ready." in log.read_bytes() or process.poll() is not None,
                   timeout=timeout, what=f"worker {process.pid} to start")
        if process.poll() is not None:
            raise AssertionError(f"worker exited {process.returncode}:\n{_log_tail(log)}")

    @property
    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None]

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no warm shutdown; its unacked messages wait out the visibility timeout."""
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    def restart(self, process: subprocess.Popen[bytes], *,
                wait: bool = True) -> subprocess.Popen[bytes]:
        """SIGKILL `process` and start another with the same settings."""
        self.kill(process)
        spec = self._specs[process.pid]
        return self.start(concurrency=spec["concurrency"], queues=spec["queues"],
                          beat=spec["beat"], env=spec["env"], wait=wait)

    def stop_all(self) -> None:
        """Warm shutdown of every live worker, SIGKILL after 15 s."""
        for process in self.live:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in self.processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(process)

    def log_text(self) -> str:
        return "\n".join(log.read_text(errors="replace") for log in self.logs if log.exists())


def spawn_fake(*, latency: float = 0.0, role_latency: dict[str, float] | None = None,
               responders: dict[str, str] | None = None) -> Any:
    """The fake Messages API in another process, every role answering as Claude would
    (`tests.providers.claude_like`) unless `responders` says otherwise."""
    from fake_anthropic import FakeAnthropic

    roles = ("planner", "executor", "verifier", "composer", "knowledge")
    chosen = {role: f"tests.providers.claude_like:{role}" for role in roles}
    chosen.update(responders or {})
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), previous]))
    try:
        return FakeAnthropic.spawn(latency=latency, role_latency=role_latency,
                                   script={"responders": chosen}, hang_seconds=120)
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


# -- the cluster -------------------------------------------------------------------------------


class Services:
    """One private Redis and one private PostgreSQL, shared by the drills of a session; each
    drill gets a fresh database and an empty Redis."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="verity-chaos-"))
        self.redis = RedisServer(self.workdir)
        self.postgres = PostgresServer()

    def start(self) -> Self:
        try:
            self.redis.start()
            self.postgres.init()
            self.postgres.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self.redis.kill()
        self.postgres.destroy()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()


def base_env(redis_url: str, database_url: str, home: Path) -> dict[str, str]:
    """The workers' and producers' environment: this process's, less any VERITY_*/ANTHROPIC_*,
    plus the private services, a short visibility timeout and small reconcile thresholds."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {
        **clean,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH")])),
        "VERITY_BROKER_URL": redis_url,
        "VERITY_RESULT_BACKEND": redis_url,
        "VERITY_DATABASE_URL": database_url,
        "VERITY_VISIBILITY_TIMEOUT": "5",
        "VERITY_HOME": str(home),
        "VERITY_PROVIDER": "offline",
        "VERITY_RECONCILE_INTERVAL_S": "1",
        "VERITY_RECONCILE_STALE_S": "5",
        "VERITY_RUN_DEADLINE_S": "900",
    }


class Cluster:
    """One drill's world: the services' fresh database, workers, an optional fake server, and
    the producer and audit helpers. Leaving the `with` ends every process it started."""

    def __init__(self, services: Services, log_dir: Path, *,
                 env: dict[str, str] | None = None) -> None:
        self.services = services
        self.redis = services.redis
        self.postgres = services.postgres
        self.log_dir = log_dir
        self.database = f"chaos_{uuid.uuid4().hex[:12]}"
        self.env = base_env(self.redis.url(0), self.postgres.url(self.database), log_dir / "home")
        self.env.update(env or {})
        self.workers = Workers(env=self.env, log_dir=log_dir)
        self.fake: Any = None
        self.reconcilers: list[subprocess.Popen[bytes]] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Self:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if not self.redis.ping():
            self.redis.start()
        if not self.postgres.running:
            self.postgres.start()
        self.redis.flushall()
        self.postgres.create_database(self.database)
        self._stack.callback(self.workers.stop_all)
        self._stack.callback(self._stop_reconcilers)
        self._produce("client.runtime.store.close()\n")  # migrates the schema once
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stack.close()
        if self.fake is not None:
            self.fake.stop()

    def use_fake(self, **settings: Any) -> Any:
        """Start the fake server (see `spawn_fake`) and point the workers at it."""
        self.fake = spawn_fake(**settings)
        self.env.update({"VERITY_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "test",
                         "ANTHROPIC_BASE_URL": self.fake.base_url})
        return self.fake

    def start_reconciler(self) -> str:
        """Run the reconciler the tree offers: a `verity reconcile` process, else a worker with
        `--beat` on the control queue; "none" when neither exists yet."""
        if cli_has("reconcile"):
            log = self.log_dir / f"reconcile-{len(self.reconcilers)}.log"
            with log.open("wb") as out:
                self.reconcilers.append(subprocess.Popen(
                    [sys.executable, "-m", "cli.main", "reconcile"], cwd=ROOT, env=self.env,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
            return "verity reconcile"
        if cli_has("beat"):
            self.workers.start(concurrency=2, queues="control", beat=True)
            return "verity worker --beat"
        return "none"

    def _stop_reconcilers(self) -> None:
        for process in self.reconcilers:
            if process.poll() is None:
                process.terminate()
        for process in self.reconcilers:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    # -- producer side (a separate process, as a web app would be) ----------------------------

    def _produce(self, code: str, stdin: str = "", timeout: float = 120) -> str:
        prelude = ("import json, os, sys\nfrom tasks.client import VerityClient\n"
                   "client = VerityClient.from_env()\n")
        done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env=self.env,
                              input=stdin, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if done.returncode != 0:
            raise AssertionError(f"producer failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout.strip()

    def submit(self, jobs: Sequence[tuple[str, str | None]]) -> list[str]:
        """Submit `(query, data_source)` pairs through `VerityClient.submit`; the run ids."""
        code = ("ids = [client.submit(q, data_source=s) for q, s in json.load(sys.stdin)]\n"
                "print(json.dumps(ids)); sys.stdout.flush(); os._exit(0)\n")
        return list(json.loads(self._produce(code, json.dumps(list(jobs)))))

    def cancel(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """`VerityClient.cancel` for each run; how many said True and how long it took."""
        code = ("import time\nstart = time.monotonic()\n"
                "said = [client.cancel(r) for r in json.load(sys.stdin)]\n"
                "print(json.dumps({'cancelled': sum(said), 'seconds': time.monotonic() - start}))\n"
                "sys.stdout.flush(); os._exit(0)\n")
        return dict(json.loads(self._produce(code, json.dumps(list(run_ids)))))

    # -- reading the database -----------------------------------------------------------------

    @contextlib.contextmanager
    def _db(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.postgres.dsn(self.database), autocommit=True) as connection:
            yield connection

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._db() as connection:
            return list(connection.execute(sql, params).fetchall())

    def count(self, run_ids: Sequence[str], *, terminal: bool = True) -> int | None:
        """Runs among `run_ids` that are terminal (or, `terminal=False`, that have committed a
        node); None while the database does not answer."""
        import psycopg

        sql = "SELECT count(*) FROM diagnosis_run WHERE run_id = ANY(%s) AND "
        if terminal:
            sql, params = sql + "status = ANY(%s)", (list(run_ids), list(TERMINAL))
        else:
            sql, params = sql + "version > 0", (list(run_ids),)
        try:
            rows = self.query(sql, params)
        except psycopg.OperationalError:
            return None
        return int(rows[0][0])

    def wait_progress(self, run_ids: Sequence[str], *, ended: int = 0, started: int = 0,
                      timeout: float = 60) -> None:
        """Until at least `ended` runs are terminal and `started` have committed a node."""
        def reached() -> bool:
            done = self.count(run_ids) if ended else 0
            moved = self.count(run_ids, terminal=False) if started else 0
            return (done or 0) >= ended and (moved or 0) >= started

        wait_until(reached, timeout=timeout, poll=0.2,
                   what=f"{ended} runs ended and {started} started")

    def drain(self, run_ids: Sequence[str], *, timeout: float, since: float | None = None,
              poll: float = 0.25) -> float:
        """Wait (at most `timeout` s) for every run to be terminal; the seconds it took from
        `since` (a monotonic time, default now), or -1 when some never ended."""
        since = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(run_ids) == len(run_ids):
                return round(time.monotonic() - since, 2)
            time.sleep(poll)
        return -1.0

    def audit(self, run_ids: Sequence[str], *, drain_time_s: float) -> Audit:
        """How the batch ended, read from the database (and the fake server's requests)."""
        ids = list(run_ids)
        runs = self.query("SELECT run_id, status, node, version, data_source FROM diagnosis_run"
                          " WHERE run_id = ANY(%s)", (ids,))
        events = self.query("SELECT run_id, seq, node, kind, payload FROM run_event "
                            "WHERE run_id = ANY(%s) ORDER BY run_id, seq", (ids,))
        tools = self.query("SELECT run_id, tool_call_id, tool_name, status, error, arguments "
                           "FROM tool_invocation WHERE run_id = ANY(%s) ORDER BY run_id, seq",
                           (ids,))
        attempts = self.query("SELECT run_id, role, cycle, attempt_number, outcome "
                              "FROM llm_attempt WHERE run_id = ANY(%s)", (ids,))
        requests = None
        if self.fake is not None:
            requests = [r for r in self.fake.requests if r["path"].startswith("/v1/messages")
                        and not r["path"].endswith("count_tokens")]
        return audit_batch(ids, runs=runs, events=events, tools=tools, attempts=attempts,
                           requests=requests, drain_time_s=drain_time_s)


__all__ = ["Audit", "Cluster", "MissingBinaryError", "PostgresServer", "RedisServer",
           "Services", "Workers", "cli_has", "free_port", "spawn_fake", "wait_until"]
