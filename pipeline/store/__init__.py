"""The run store: every read and write of run state, behind one class (`RunStore`).

The only package of `pipeline/` that imports sqlalchemy.
"""

from pipeline.store._engine import MIGRATIONS_DIR, make_engine, upgrade_schema
from pipeline.store._lease import ABANDONED, IN_FLIGHT, LeaseOutcome, LeaseState
from pipeline.store._store import RunStore

__all__ = [
    "ABANDONED",
    "IN_FLIGHT",
    "MIGRATIONS_DIR",
    "LeaseOutcome",
    "LeaseState",
    "RunStore",
    "make_engine",
    "upgrade_schema",
]
