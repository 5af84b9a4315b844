"""The run store: every read and write of run state, behind one protocol (`RunStore`), one class
per backend (`SqliteStore`, `PostgresStore`); `open_store(url)` picks the backend.

The only package of `pipeline/` that imports sqlalchemy. Its modules:

    protocol    RunStore, the interface callers use, and the capabilities a backend declares
    factory     open_store / store_for: the backend a URL or an engine names
    sql         SqlStore, the ORM path both backends share
    sqlite      SqliteStore: Core statements (statements) in write transactions
    postgres    PostgresStore: one prepared statement per task on the hot path (pg)
    leases      Leases (node leases, the attempt journal) over a backend's LeaseSql
    batches     Batches: re-verification selection, batches and items
    tokens      Tokens / PgTokens: API tokens
    alerts      SqliteAlerts / PgAlerts: alert group records (one run per firing group)
    sweep       the reconciler's statements
    rows        row operations inside one transaction, shared by both backends
    convert     rows to contracts
    engine      engines, migrations, transactions (Database)
"""

from pipeline.store.engine import MIGRATIONS_DIR, make_engine, upgrade_schema
from pipeline.store.factory import open_store, store_for
from pipeline.store.leases import ABANDONED, IN_FLIGHT, LeaseOutcome, LeaseState
from pipeline.store.postgres import PostgresStore
from pipeline.store.protocol import Capability, RunStore
from pipeline.store.sqlite import SqliteStore

__all__ = [
    "ABANDONED",
    "IN_FLIGHT",
    "MIGRATIONS_DIR",
    "Capability",
    "LeaseOutcome",
    "LeaseState",
    "PostgresStore",
    "RunStore",
    "SqliteStore",
    "make_engine",
    "open_store",
    "store_for",
    "upgrade_schema",
]
