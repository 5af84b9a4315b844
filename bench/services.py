"""What the benchmarks share: the local services (a scratch PostgreSQL schema, a Redis
database of the benchmarks' own), worker processes as `verity worker` runs them, a
reconciler beside them, and an OTLP/HTTP endpoint that takes the spans exported to it."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG = os.environ.get("VERITY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("VERITY_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")


def serve_exports(on_export: Callable[[bytes], None]) -> str:
    """An OTLP/HTTP endpoint on a free local port, served by a daemon thread: each POSTed
    body goes to `on_export` and is answered 200. Its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            on_export(self.rfile.read(int(self.headers.get("content-length", "0"))))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def scratch_database(prefix: str = "verity_bench") -> Iterator[str]:
    """A URL on a new PostgreSQL schema, with the benchmarks' Redis database empty; the schema
    dropped and Redis emptied again on exit."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = _create_schema(schema)
    flush_redis()
    try:
        yield url
    finally:
        _drop_schema(schema)
        flush_redis()


class Worker:
    """`celery worker` as `verity worker` runs it (threads pool, task events): one process per
    `(queues, threads)` group on this host, plus the bare baseline's tasks when
    `include_bare`."""

    def __init__(self, groups: list[tuple[str, int]], *, factory: str | None,
                 include_bare: bool = True, beat: bool = False) -> None:
        self.groups = groups
        self.factory = factory
        self.include_bare = include_bare
        # the first process on the control queue embeds beat (as `verity worker --beat`)
        self.beat_index = next((i for i, (queues, _) in enumerate(groups)
                                if "control" in queues.split(",")), None) if beat else None
        if beat and self.beat_index is None:
            raise SystemExit("--reconciler beat: no worker process consumes the control queue")
        self._beat_dir: str | None = None
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs = [Path(f"/tmp/verity-bench-worker-{os.getpid()}-{i}.log")
                     for i in range(len(self.groups))]

    def __enter__(self) -> Worker:
        env = dict(os.environ)
        env.pop("VERITY_RUNTIME_FACTORY", None)
        if self.factory:
            env["VERITY_RUNTIME_FACTORY"] = self.factory
        extra = ["--include", "bench.bare_tasks"] if self.include_bare else []
        for i, ((queues, threads), log_path) in enumerate(
                zip(self.groups, self.logs, strict=True)):
            argv = ["worker", "--pool", "threads", "--concurrency", str(threads),
                    "--hostname", f"bench{i}@%h",
                    "--queues", queues, "--task-events", "--without-gossip",
                    "--without-mingle", "--loglevel", "INFO", *extra]
            if i == self.beat_index:
                # `verity worker --beat`: beat a thread of the worker, its schedule file in a
                # folder of its own
                self._beat_dir = tempfile.mkdtemp(prefix="verity-bench-beat-")
                command = [sys.executable, "-c", BEAT_WORKER, *argv, "--beat", "--schedule",
                           str(Path(self._beat_dir) / "schedule")]
            else:
                command = [sys.executable, "-m", "celery", "--app", "tasks.app", *argv]
            with log_path.open("wb") as out:
                self.processes.append(subprocess.Popen(
                    command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                ))
        deadline = time.monotonic() + 30
        for process, log_path in zip(self.processes, self.logs, strict=True):
            while b"ready." not in log_path.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SystemExit(f"worker did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.1)
        return self

    def __exit__(self, *_: object) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(30)
        if self._beat_dir is not None:
            shutil.rmtree(self._beat_dir, ignore_errors=True)

    def beat_sweeps(self) -> dict[str, Any]:
        """The embedded beat's sweeps so far, from the workers' logs (any control worker may
        run one): how many ran and what they did, summed (`verity.reconcile.sweep` returns
        its counts)."""
        if self.beat_index is None:
            return {}
        lines = [line for log_path in self.logs
                 for line in log_path.read_text(errors="replace").splitlines()
                 if "verity.reconcile.sweep[" in line and " succeeded in " in line]
        return sweep_totals(line[line.index("{", line.index(" succeeded in ")):]
                             for line in lines if "{" in line)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def cpu_seconds(self) -> float:
        """The CPU time the workers have used so far (user and system, every thread), summed:
        less moved by other load on the host than wall time."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids:
            stat = Path(f"/proc/{pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()  # after the command name
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        return total / ticks

    def peak_rss_mb(self) -> float:
        """The workers' peak resident memory (VmHWM), summed."""
        return self._status_mb("VmHWM:")

    def rss_mb(self) -> float:
        """The workers' resident memory now (VmRSS), summed."""
        return self._status_mb("VmRSS:")

    def _status_mb(self, key: str) -> float:
        total = 0
        for pid in self.pids:
            status = Path(f"/proc/{pid}/status").read_text()
            line = next(x for x in status.splitlines() if x.startswith(key))
            total += int(line.split()[1])
        return total / 1024


BEAT_WORKER = ("import sys\n"
                "from tasks.reconcile import use_threaded_beat\n"
                "use_threaded_beat()\n"
                "from tasks.app import app\n"
                "app.worker_main(sys.argv[1:])\n")

RECONCILERS = ("reconcile", "beat", "none")


class Reconciler:
    """The reconciler beside the workers: `reconcile`, a `verity reconcile` process (its
    sweeps every VERITY_RECONCILE_INTERVAL_S, 15 s unless set); `beat`, beat embedded in the
    first worker on the control queue (`Worker(beat=True)`, as `verity worker --beat`);
    `none`."""

    def __init__(self, kind: str) -> None:
        if kind not in RECONCILERS:
            raise SystemExit(f"--reconciler: {kind!r}; choose among {', '.join(RECONCILERS)}")
        self.kind = kind
        self.process: subprocess.Popen[bytes] | None = None
        self.log = Path(f"/tmp/verity-bench-reconcile-{os.getpid()}.log")
        self.worker: Worker | None = None

    def __enter__(self) -> Reconciler:
        if self.kind == "reconcile":
            with self.log.open("wb") as out:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "cli.main", "reconcile"], cwd=ROOT,
                    env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
            # its start-up (imports, the schema check, the first sweep: about a CPU second)
            # is over before anything is measured
            deadline = time.monotonic() + 60
            while b"{" not in self.log.read_bytes():
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise SystemExit("verity reconcile did not start: "
                                     f"{self.log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.1)
        return self

    def __exit__(self, *_: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def report(self) -> dict[str, Any]:
        """Which reconciler ran, its interval and staleness threshold, whether it is still
        alive, and its sweeps so far with what they did."""
        from pipeline.config import VeritySettings

        settings = VeritySettings()
        found: dict[str, Any] = {
            "kind": self.kind,
            "runs_as": {"reconcile": "a `verity reconcile` process",
                        "beat": "beat embedded in the first control worker (a thread, as "
                                "`verity worker --beat`)",
                        "none": "no reconciler"}[self.kind]}
        if self.kind == "none":
            return found
        found |= {"interval_s": settings.reconcile_interval_s,
                  "stale_after_s": settings.reconcile_stale_s}
        if self.process is not None:
            found["alive"] = self.process.poll() is None
            lines = self.log.read_text(errors="replace").splitlines()
            found |= sweep_totals(line for line in lines if line.startswith("{"))
        elif self.worker is not None:
            found["alive"] = all(p.poll() is None for p in self.worker.processes)
            found |= self.worker.beat_sweeps()
        return found


def sweep_totals(lines: Any) -> dict[str, Any]:
    """Sweeps counted and their counts summed, from one dict per sweep (JSON or repr)."""
    import ast

    sweeps, totals = 0, collections.Counter[str]()
    for line in lines:
        try:
            counts = json.loads(line)
        except ValueError:
            try:
                counts = ast.literal_eval(line.strip())
            except (ValueError, SyntaxError):
                continue
        if isinstance(counts, dict):
            sweeps += 1
            totals.update({k: v for k, v in counts.items() if isinstance(v, int)})
    return {"sweeps": sweeps, "actions": dict(totals)}


def _create_schema(schema: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(PG)
    with engine.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    url = make_url(PG).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def _drop_schema(schema: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(PG)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def flush_redis() -> None:
    import redis

    client = redis.Redis.from_url(REDIS)
    client.flushdb()
    client.close()
