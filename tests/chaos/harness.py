"""The chaos drills' machinery: a private Redis and PostgreSQL, worker processes, the fake
Anthropic server, a batch of runs and the audit of how the batch ended.

Everything runs on free ports of 127.0.0.1 in temporary folders, so killing a service harms
nothing else (the shared 5432/6379 are never touched). Shared by `tests/chaos/` and
`bench/chaos.py`:

    with Services() as services, Cluster(services, log_dir) as cluster:  # a fresh database
        cluster.workers.start(concurrency=4)         # `verity worker` processes
        cluster.start_reconciler()                   # `verity reconcile`
        run_ids = cluster.submit([(query, source)] * 50)
        cluster.redis.kill(); cluster.redis.start()  # the fault
        drained = cluster.drain(run_ids, timeout=90)
        audit = cluster.audit(run_ids, drain_time_s=drained)  # stuck, duplicates, attempts

Every process started is ended by the `with`, also when the drill fails; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.chaos.audit import Audit, audit_batch
from tests.chaos.services import (
    TERMINAL,
    MissingBinaryError,
    PostgresServer,
    RedisServer,
    Services,
    free_port,
    log_tail,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]


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
            raise AssertionError(f"worker exited {process.returncode}:\n{log_tail(log)}")

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

def base_env(redis_url: str, database_url: str, home: Path) -> dict[str, str]:
    """The workers' and producers' environment: this process's, less any VERITY_*/ANTHROPIC_*,
    plus the private services, a short visibility timeout and node lease, and small reconcile
    thresholds."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {
        **clean,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH")])),
        "VERITY_BROKER_URL": redis_url,
        "VERITY_RESULT_BACKEND": redis_url,
        "VERITY_DATABASE_URL": database_url,
        "VERITY_TENANT": "chaos",
        "VERITY_VISIBILITY_TIMEOUT": "6",
        # a dead copy's lease must lapse before its message is redelivered (TTL <= half)
        "VERITY_LEASE_TTL_S": "3",
        "VERITY_LEASE_RENEW_S": "0.5",
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
        self.reconcilers: list[tuple[str, subprocess.Popen[bytes], Path]] = []
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

    def start_reconciler(self, kind: str | None = None) -> str:
        """Run a reconciler: `reconcile` (a `verity reconcile` service, the default), `beat`
        (a `verity worker --beat` on the control queue) or `none`; $CHAOS_RECONCILER chooses
        when `kind` is None. A kind this tree does not offer yet falls back to the other, then
        to none. Returns the kind started."""
        kind = kind or os.environ.get("CHAOS_RECONCILER", "reconcile")
        order = {"reconcile": ["reconcile", "beat"], "beat": ["beat", "reconcile"]}
        for choice in order.get(kind, []):
            if not cli_has(choice):
                continue
            log = self.log_dir / f"reconciler-{len(self.reconcilers)}.log"
            if choice == "beat":
                process = self.workers.start(concurrency=2, queues="control", beat=True)
                log = self.workers.logs[-1]
            else:
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        [sys.executable, "-m", "cli.main", "reconcile"], cwd=ROOT,
                        env=self.env, stdout=out, stderr=subprocess.STDOUT,
                        start_new_session=True)
            self.reconcilers.append((choice, process, log))
            return choice
        return "none"

    def reconciler_health(self) -> list[dict[str, Any]]:
        """Each reconciler started: its kind, whether it still runs, and how a dead one ended."""
        health = []
        for kind, process, log in self.reconcilers:
            alive = process.poll() is None
            health.append({"kind": kind, "alive": alive} | (
                {} if alive else {"exit": process.returncode, "log_tail": log_tail(log, 600)}))
        return health

    def _stop_reconcilers(self) -> None:
        processes = [process for _, process, _ in self.reconcilers]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    # -- producer side (a separate process, as a web app would be) ----------------------------

    def _produce(self, code: str, stdin: str = "", timeout: float = 120) -> str:
        prelude = ("import json, os, sys\nfrom client import VerityClient\n"
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
