"""`verity run` and `verity reconcile` when the services or settings are wrong: one line on
stderr, a non-zero exit, no traceback, nothing left behind."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from pipeline.store import open_store
from tests.conftest import run_verity


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _one_line(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_run__a_broker_that_is_down_is_one_line_and_leaves_no_run(
    env: dict[str, str], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'shared.db'}"
    env.update(VERITY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0",
               VERITY_DATABASE_URL=database)
    done = run_verity("run", "Why is checkout-service returning 500s?", "--scenario",
                      "checkout-pool-exhaustion", env=env)
    _one_line(done, 1, "verity: error: broker unavailable: ", "refused")
    with open_store(database) as store:
        assert store.list_runs(tenant_id="default") == []


@pytest.mark.postgres
def test_run__a_database_that_is_down_is_one_line(
    env: dict[str, str], postgres_server_url: str
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_server_url).set(port=_closed_port())
    env.update(VERITY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0",
               VERITY_DATABASE_URL=url.render_as_string(hide_password=False))
    done = run_verity("run", "why?", "--scenario", "checkout-pool-exhaustion", env=env)
    _one_line(done, 2, "verity: error: database unavailable: ", "refused")


def test_run__a_broker_without_a_shared_database_is_one_line(env: dict[str, str]) -> None:
    env["VERITY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
    done = run_verity("run", "why?", "--scenario", "checkout-pool-exhaustion", env=env)
    _one_line(done, 1, "also set VERITY_DATABASE_URL")


@pytest.mark.parametrize(("extra", "needle"), [
    pytest.param({}, "set VERITY_BROKER_URL", id="no-broker"),
    pytest.param({"VERITY_BROKER_URL": "redis://127.0.0.1:6379/0"},
                 "also set VERITY_DATABASE_URL", id="no-shared-database"),
])
def test_reconcile__needs_a_broker_and_the_workers_database(
    env: dict[str, str], extra: dict[str, str], needle: str
) -> None:
    done = run_verity("reconcile", "--once", env={**env, **extra})
    _one_line(done, 1, needle)


def test_reconcile__once_with_a_broker_that_is_down_still_fails_overdue_runs(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The deadline needs no broker: a sweep ends an overdue run even while Redis is down, and
    reports the re-send it could not make."""
    from models.common import Intent

    database = f"sqlite:///{tmp_path / 'shared.db'}"
    with open_store(database) as store:
        overdue = store.create_run(tenant_id="default", query="q", intent=Intent.DIAGNOSIS,
                                   deadline_s=0.001, state={"next": {"node": "plan"}})
        stalled = store.create_run(tenant_id="default", query="q", intent=Intent.DIAGNOSIS,
                                   state={"next": {"node": "plan"}})
    env.update(VERITY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0",
               VERITY_DATABASE_URL=database, VERITY_RECONCILE_STALE_S="0.001")
    done = run_verity("reconcile", "--once", env=env)
    assert done.returncode == 0, done.stderr

    assert json.loads(done.stdout) == {"resent": 0, "failed_deadline": 1, "cancelled": 0,
                                       "invalid": 0, "resend_errors": 1,
                                       "deliveries_resent": 0}
    with open_store(database) as store:
        assert store.get_run(overdue, tenant_id="default").status.value == "FAILED"
        # re-sent once Redis is back
        assert store.get_run(stalled, tenant_id="default").status.value == "PENDING"
