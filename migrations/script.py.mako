"""${message}"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}
revision: str = ${repr(up_revision)}
down_revision: str | None = ${repr(down_revision)}
% if branch_labels:
branch_labels: tuple[str, ...] = ${repr(branch_labels)}
% endif
% if depends_on:
depends_on: str | tuple[str, ...] = ${repr(depends_on)}
% endif


def upgrade() -> None:
    """Apply this revision."""
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    """Revert this revision."""
    ${downgrades if downgrades else "pass"}
