"""HTTP API tokens: one row per token, bound to a tenant, with the sha256 of its secret (never
the secret), and when it was created, last used and revoked.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create api_token."""
    op.create_table(
        "api_token",
        sa.Column("token_id", sa.String(length=32), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("secret_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("revoked_at", _utc(), nullable=True),
        sa.Column("last_used_at", _utc(), nullable=True),
        sa.PrimaryKeyConstraint("token_id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("secret_sha256", name=op.f("uq_api_token_secret_sha256")),
    )
    op.create_index(op.f("ix_api_token_tenant_id"), "api_token", ["tenant_id"])


def downgrade() -> None:
    """Drop api_token (every token with it)."""
    op.drop_index(op.f("ix_api_token_tenant_id"), table_name="api_token")
    op.drop_table("api_token")
