"""The drills' private services: `redis-server` and a PostgreSQL cluster (`initdb` +
`pg_ctl`) on free ports of 127.0.0.1 in temporary folders, killed or stopped and started again
on the same port. Nothing here touches the machine's own 5432/6379."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Self

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


def log_tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file ("" when it cannot be read)."""
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
                               f"{(done.stderr or done.stdout)[-2000:]}\n{log_tail(self.log)}")

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
