"""Alembic environment for Verity.

Two ways in:
- `open_store()` passes an open connection in `config.attributes["connection"]`, already
  inside the transaction (and, on PostgreSQL, the advisory lock) it wants the upgrade to use;
- a developer runs `alembic upgrade head`: the URL is `sqlalchemy.url` from the config when
  set, else `VERITY_DATABASE_URL`, else Verity's default SQLite file.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from models.tables import Base
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.store import make_engine

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and "connection" not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url() -> str:
    """The configured URL, else the one Verity itself would use."""
    return config.get_main_option("sqlalchemy.url") or resolve_database_url(VeritySettings())


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        compare_server_default=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout (`alembic upgrade head --sql`)."""
    context.configure(
        url=_database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Upgrade through a given connection, or open one from the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_database_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
