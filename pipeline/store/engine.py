"""Engines, schema migration and transactions of the run store (`Database`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from models.common import RunStatus
from pipeline.errors import StoreUnavailableError
from pipeline.package_data import MIGRATIONS_PACKAGE, package_folder

MIGRATIONS_DIR = package_folder(MIGRATIONS_PACKAGE)
"""The Alembic script location: the `verity_migrations` package's folder (`migrations/` in a
checkout), so upgrades need no `alembic.ini` and no particular working directory."""

_MIGRATION_LOCK_KEY = 0x7665726974790001  # pg_advisory_xact_lock key: b"verity" + 1
TERMINAL = [status.value for status in RunStatus if status.terminal]
"""The run statuses a run never leaves."""
WRITE = {"verity_write": True}
"""Execution options of a write transaction (SQLite's "begin" hook: BEGIN IMMEDIATE)."""
NO_SYNC = {"synchronize_session": False}
"""Execution options of an ORM update that keeps no session objects in step."""
RUN_ID_MAX = 64
"""The longest run id."""
_BUSY_TIMEOUT_S = 5.0


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite gets WAL, foreign keys, a busy timeout and write locks."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    # No pre-ping (it costs a round trip, often three, on every checkout): a connection found
    # dead is reported as StoreUnavailableError, the pool drops it and the task is retried.
    return create_engine(parsed)


def autocommit_engine(engine: Engine) -> Engine:
    """The engine for autocommit work: on PostgreSQL a second pool that stays in autocommit;
    elsewhere the same pool with the isolation level set per connection."""
    if engine.dialect.name == "postgresql":
        return create_engine(engine.url, isolation_level="AUTOCOMMIT")
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def _sqlite_engine(url: URL) -> Engine:
    database = url.database or ":memory:"
    in_memory = database == ":memory:" or "mode=memory" in database
    if not in_memory and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": _BUSY_TIMEOUT_S},
        poolclass=StaticPool if in_memory else None,
    )
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # SQLAlchemy, not pysqlite, emits BEGIN (see _on_sqlite_begin): savepoints and DDL work.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        _enable_wal(cursor)
    finally:
        cursor.close()


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at
    # once (no busy handler) while another connection writes: retry within the busy timeout.
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] in ("wal", "memory"):
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _on_sqlite_begin(connection: Connection) -> None:
    # A writer takes the write lock up front: a deferred transaction that reads, then writes,
    # fails at once with SQLITE_BUSY in WAL mode instead of waiting for busy_timeout.
    immediate = connection.get_execution_options().get("verity_write", False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def upgrade_schema(engine: Engine) -> None:
    """Run `alembic upgrade head` on `engine`: idempotent, safe from concurrent processes."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect() as connection:
        connection.execution_options(**WRITE)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK_KEY)))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")




@contextmanager
def available() -> Iterator[None]:
    """A lost or refused database connection becomes StoreUnavailableError (retryable); the
    pool has already dropped the broken connection."""
    try:
        yield
    except (OperationalError, InterfaceError) as exc:
        raise unavailable(exc.orig or exc) from exc


def unavailable(exc: BaseException) -> StoreUnavailableError:
    """The retryable error for a database that cannot be reached, naming the cause."""
    lines = str(exc).strip().splitlines()
    return StoreUnavailableError(
        f"database unavailable: {lines[0] if lines else type(exc).__name__}")


class Database:
    """An engine at schema head, its autocommit twin and the transactions the store runs in;
    shared by a store and the parts it is made of (leases, batches, tokens)."""

    def __init__(self, engine: Engine) -> None:
        """Wrap `engine` (owned: `close` disposes of it)."""
        self.engine = engine
        # Reads, and on PostgreSQL the one-statement hot writes, run in autocommit: one round
        # trip per statement, no BEGIN/COMMIT around it. PostgreSQL gets a pool of its own
        # that stays in autocommit (no isolation switch on every checkout).
        self.fast = autocommit_engine(engine)
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(self.fast, expire_on_commit=False)

    def close(self) -> None:
        """Close every pooled connection."""
        self.fast.dispose()
        self.engine.dispose()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """An ORM session in a write transaction, committed on exit."""
        with available(), self._sessions.begin() as session:
            session.connection(execution_options=WRITE)
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """An ORM session on the autocommit pool."""
        with available(), self._read_sessions() as session:
            yield session

    @contextmanager
    def connect_write(self) -> Iterator[Connection]:
        """A Core connection in a write transaction: the hot paths skip the ORM session."""
        with available(), self.engine.connect() as connection:
            connection = connection.execution_options(**WRITE)
            with connection.begin():
                yield connection

    @contextmanager
    def connect_read(self) -> Iterator[Connection]:
        """A Core connection in autocommit: reads, and PostgreSQL's one-statement writes."""
        with available(), self.fast.connect() as connection:
            yield connection
