"""Imported runs: `diagnosis_run.imported_json` keeps another agent's answer as written, with
its claims' spans (`RunBundle.imported`), so an imported run exports and re-verifies with it.

NULL for every existing row and for Verity's own runs; an imported run's origin (`source`) is
`import`, a plain string like the others.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"


def _json() -> sa.JSON:
    # Plain `json` on PostgreSQL, not `jsonb`: documents keep their key order.
    return sa.JSON()


def upgrade() -> None:
    """Add imported_json."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.add_column(sa.Column("imported_json", _json(), nullable=True))


def downgrade() -> None:
    """Drop imported_json (imported answers with it; their runs stay, origin `import`)."""
    with op.batch_alter_table("diagnosis_run") as batch:
        batch.drop_column("imported_json")
