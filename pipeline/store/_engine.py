"""Engines and schema migration for the run store."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, func, select
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

from models.common import RunStatus
from pipeline.package_data import MIGRATIONS_PACKAGE, package_folder

MIGRATIONS_DIR = package_folder(MIGRATIONS_PACKAGE)
"""The Alembic script location: the `verity_migrations` package's folder (`migrations/` in a
checkout), so upgrades need no `alembic.ini` and no particular working directory."""

_MIGRATION_LOCK_KEY = 0x7665726974790001  # pg_advisory_xact_lock key: b"verity" + 1
_TERMINAL = [status.value for status in RunStatus if status.terminal]
_WRITE = {"verity_write": True}  # read by the SQLite "begin" hook: BEGIN IMMEDIATE
_NO_SYNC = {"synchronize_session": False}
_RUN_ID_MAX = 64
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
        connection.execution_options(**_WRITE)
        with connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_LOCK_KEY)))
            config.attributes["connection"] = connection
            command.upgrade(config, "head")


