"""The Alembic migrations build exactly the schema of models/tables.py, on both backends."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, UniqueConstraint, inspect, text

from models.common import Intent
from models.tables import Base
from pipeline.errors import RunNotFoundError
from pipeline.store import (
    MIGRATIONS_DIR,
    make_engine,
    open_store,
    store_for,
    upgrade_schema,
)

TENANT = "team-a"
"""The owner of this module's runs."""


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on a fresh database (the store's engine settings), disposed afterwards."""
    created = make_engine(database_url)
    yield created
    created.dispose()


def _head() -> str | None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def _diffs(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, Base.metadata))


def _revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _downgrade_to(engine: Engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def _downgrade_to_base(engine: Engine) -> None:
    _downgrade_to(engine, "base")


def _backs_constraint(index: Any) -> bool:
    return bool(index.get("duplicates_constraint"))


def test_migrated_schema_equals_the_table_metadata(engine: Engine) -> None:
    upgrade_schema(engine)
    assert _revision(engine) == _head() == "0011"
    assert _diffs(engine) == []


def test_constraint_names_follow_the_naming_convention(engine: Engine) -> None:
    upgrade_schema(engine)
    inspector = inspect(engine)
    for table in Base.metadata.sorted_tables:
        expected_fks = {fk.name for fk in table.foreign_key_constraints}
        expected_uqs = {c.name for c in table.constraints if isinstance(c, UniqueConstraint)}
        expected_ixs = {ix.name for ix in table.indexes}
        # PostgreSQL also reports the index behind each unique constraint.
        indexes = [ix for ix in inspector.get_indexes(table.name) if not _backs_constraint(ix)]
        assert {fk["name"] for fk in inspector.get_foreign_keys(table.name)} == expected_fks
        assert {uq["name"] for uq in inspector.get_unique_constraints(table.name)} == expected_uqs
        assert {ix["name"] for ix in indexes} == expected_ixs
        assert inspector.get_pk_constraint(table.name)["name"] == f"pk_{table.name}"


def test_upgrading_twice_is_a_no_op(database_url: str, engine: Engine) -> None:
    with open_store(database_url) as store:
        run_id = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS)
    with open_store(database_url) as store:
        assert store.get_run(run_id, tenant_id=TENANT).query == "q"
    upgrade_schema(engine)
    assert _revision(engine) == _head()
    assert _diffs(engine) == []


def test_downgrade_to_base_then_upgrade_again(engine: Engine) -> None:
    upgrade_schema(engine)
    _downgrade_to_base(engine)
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    assert _revision(engine) is None
    upgrade_schema(engine)
    assert _diffs(engine) == []


def test_concurrent_opens_migrate_once(database_url: str) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_once() -> None:
        try:
            barrier.wait()
            open_store(database_url).close()
        except BaseException as exc:  # reported below, in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=open_once) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with open_store(database_url) as store:
        assert store.list_runs(tenant_id=TENANT) == []


def _upgrade_to(engine: Engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def test_tenants__runs_stored_before_0005_belong_to_default(engine: Engine) -> None:
    _upgrade_to(engine, "0004")
    insert = text(
        "INSERT INTO diagnosis_run (run_id, session_id, query, intent, status, created_at, "
        "updated_at) VALUES (:run_id, 'sre-42', 'why?', 'DIAGNOSIS', 'SUCCESS', :now, :now)")
    now = datetime.now(UTC)
    with engine.begin() as connection:
        for run_id in ("old-1", "old-2"):
            connection.execute(insert, {"run_id": run_id, "now": now})
    upgrade_schema(engine)
    assert _revision(engine) == _head()
    assert _diffs(engine) == []
    with store_for(engine) as store:
        assert store.get_run("old-1", tenant_id="default").tenant_id == "default"
        assert {r.run_id for r in store.list_runs(tenant_id="default")} == {"old-1", "old-2"}
        assert store.previous_turn("default", "sre-42") is not None
        assert store.list_runs(tenant_id="team-b") == []
        assert store.previous_turn("team-b", "sre-42") is None
        with pytest.raises(RunNotFoundError, match="^no run with id 'old-1'$"):
            store.get_run("old-1", tenant_id="team-b")


def _columns(engine: Engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def test_deliveries__0010_adds_the_delivery_tables_and_downgrades_without_them(
        engine: Engine) -> None:
    _upgrade_to(engine, "0008")
    assert not {"delivery", "delivery_attempt"} & set(inspect(engine).get_table_names())
    _upgrade_to(engine, "0010")
    assert {"delivery", "delivery_attempt"} <= set(inspect(engine).get_table_names())
    _upgrade_to(engine, "0011")
    assert _diffs(engine) == []
    _downgrade_to(engine, "0008")
    assert not {"delivery", "delivery_attempt"} & set(inspect(engine).get_table_names())


def test_imported_answer__0008_adds_imported_json_and_downgrades_without_it(
        engine: Engine) -> None:
    _upgrade_to(engine, "0007")
    insert = text(
        "INSERT INTO diagnosis_run (run_id, tenant_id, query, intent, status, source, "
        "created_at, updated_at) VALUES ('old-1', :tenant, 'why?', 'DIAGNOSIS', 'SUCCESS', "
        "'verify', :now, :now)")
    with engine.begin() as connection:
        connection.execute(insert, {"tenant": TENANT, "now": datetime.now(UTC)})
    assert "imported_json" not in _columns(engine, "diagnosis_run")
    _upgrade_to(engine, "0008")
    assert "imported_json" in _columns(engine, "diagnosis_run")
    _upgrade_to(engine, "0011")  # the store reads every column of the head
    assert _diffs(engine) == []
    with store_for(engine) as store:
        old = store.get_run("old-1", tenant_id=TENANT)
        assert (old.origin, old.imported) == ("verify", None)
    _downgrade_to(engine, "0007")
    assert _revision(engine) == "0007"
    assert "imported_json" not in _columns(engine, "diagnosis_run")
    with engine.connect() as connection:
        kept = connection.execute(text("SELECT source FROM diagnosis_run")).scalars().all()
    assert kept == ["verify"]


def test_alert_groups__0009_adds_alert_group_and_alert_json_and_downgrades_without(
        engine: Engine) -> None:
    _upgrade_to(engine, "0008")
    insert = text(
        "INSERT INTO diagnosis_run (run_id, tenant_id, query, intent, status, source, "
        "created_at, updated_at) VALUES ('old-1', :tenant, 'why?', 'DIAGNOSIS', 'SUCCESS', "
        "'run', :now, :now)")
    with engine.begin() as connection:
        connection.execute(insert, {"tenant": TENANT, "now": datetime.now(UTC)})
    assert "alert_group" not in inspect(engine).get_table_names()
    _upgrade_to(engine, "0009")
    assert "alert_json" in _columns(engine, "diagnosis_run")
    assert "alert_group" in inspect(engine).get_table_names()
    _upgrade_to(engine, "0011")  # the store reads every column of the head
    assert _diffs(engine) == []
    with store_for(engine) as store:
        assert store.get_run("old-1", tenant_id=TENANT).alert is None
        assert store.list_alert_groups(tenant_id=TENANT) == []
    _downgrade_to(engine, "0008")
    assert "alert_group" not in inspect(engine).get_table_names()
    assert "alert_json" not in _columns(engine, "diagnosis_run")
    with engine.connect() as connection:
        kept = connection.execute(text("SELECT run_id FROM diagnosis_run")).scalars().all()
    assert kept == ["old-1"]


def test_trace_id__0011_adds_a_nullable_trace_id_and_downgrades_without_it(
        engine: Engine) -> None:
    _upgrade_to(engine, "0008")
    insert = text(
        "INSERT INTO diagnosis_run (run_id, tenant_id, query, intent, status, source, "
        "created_at, updated_at) VALUES ('old-1', :tenant, 'why?', 'DIAGNOSIS', 'SUCCESS', "
        "'run', :now, :now)")
    with engine.begin() as connection:
        connection.execute(insert, {"tenant": TENANT, "now": datetime.now(UTC)})
    assert "trace_id" not in _columns(engine, "diagnosis_run")
    _upgrade_to(engine, "0011")
    assert "trace_id" in _columns(engine, "diagnosis_run")
    assert _diffs(engine) == []
    with store_for(engine) as store:
        assert store.get_run("old-1", tenant_id=TENANT).trace_id is None
        run_id = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS,
                                  trace_id="ab" * 16)
        assert store.get_run(run_id, tenant_id=TENANT).trace_id == "ab" * 16
    _downgrade_to(engine, "0008")
    assert "trace_id" not in _columns(engine, "diagnosis_run")
