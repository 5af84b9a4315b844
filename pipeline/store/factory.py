"""Opening a store: the backend a URL names, its schema migrated to head."""

from __future__ import annotations

from sqlalchemy import Engine

from pipeline.store.engine import available, make_engine, upgrade_schema
from pipeline.store.postgres import PostgresStore
from pipeline.store.sql import SqlStore
from pipeline.store.sqlite import SqliteStore
from pipeline.store.sweep import DEFAULT_RUN_DEADLINE_S


def open_store(url: str, *, run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> SqlStore:
    """Connect to `url` and migrate the schema to head (`open_store`); a database that
    cannot be reached is StoreUnavailableError."""
    engine = make_engine(url)
    try:
        with available():
            upgrade_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return store_for(engine, run_deadline_s=run_deadline_s)


def store_for(engine: Engine, *, run_deadline_s: float = DEFAULT_RUN_DEADLINE_S) -> SqlStore:
    """The store of `engine`'s backend, on an engine whose schema is already at head."""
    if engine.dialect.name == "postgresql":
        return PostgresStore(engine, run_deadline_s=run_deadline_s)
    return SqliteStore(engine, run_deadline_s=run_deadline_s)
