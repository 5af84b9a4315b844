"""Batch re-verification through real worker processes on real Redis and PostgreSQL, over 200+
stored runs made by real offline runs of every shipped diagnosis scenario: one result per run,
the expected transitions under a stricter Verifier, exactly one result per item after a worker
is SIGKILLed mid-batch, a cancel that stops a batch, and stored runs unchanged byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from models.batch import BatchStatus, ItemStatus
from models.common import Intent, Verdict
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.scenarios import default_scenarios_dir, list_scenarios
from pipeline.store import RunStore, open_store
from tests.integration.conftest import ROOT, TENANT, Workers, wait_for
from tests.providers.test_fake_runs import drive
from tests.store_rows import batch_attempts

RUNS_PER_SCENARIO = 26
"""8 diagnosis scenarios x 26 = 208 stored runs (and 26 knowledge runs, which no batch picks)."""


@pytest.fixture(scope="module")
def stored_url(postgres_server_url: str) -> Iterator[str]:
    """A schema of this module's own holding 200+ real offline runs (made once)."""
    schema = f"verity_batch_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server_url, poolclass=NullPool)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(postgres_server_url).update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    runtime = build_runtime(VeritySettings(database_url=url, provider="offline"))
    try:
        for _ in range(RUNS_PER_SCENARIO):
            for info in list_scenarios(default_scenarios_dir()):
                drive(runtime, info.name, tenant_id=TENANT)
        runtime.store.close()
        yield url
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def env(runtime_env: dict[str, str], stored_url: str) -> dict[str, str]:
    return {**runtime_env, "VERITY_DATABASE_URL": stored_url,
            "VERITY_RECONCILE_STALE_S": "3", "VERITY_RECONCILE_INTERVAL_S": "1"}


@pytest.fixture
def batch_workers(env: dict[str, str], tmp_path: Path) -> Iterator[Workers]:
    started = Workers(env=env, log_dir=tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def store(stored_url: str) -> Iterator[RunStore]:
    with open_store(stored_url) as opened:
        yield opened


def _runs_snapshot(url: str) -> str:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT run_id, status, verdict, fallback_type, version, "
                "CAST(final_answer AS text), CAST(self_evaluation AS text), updated_at, "
                "finished_at FROM diagnosis_run ORDER BY run_id")).all()
            attempts = connection.execute(text(
                "SELECT count(*) FROM llm_attempt WHERE batch_id = ''")).scalar_one()
    finally:
        engine.dispose()
    return json.dumps([[str(v) for v in row] for row in rows]) + f"|{attempts}"


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _reverify(env: dict[str, str], *args: str) -> str:
    done = _cli(env, "reverify", "--json", "--no-wait", *args)
    assert done.returncode == 0, done.stderr[-2000:]
    return str(json.loads(done.stdout)["batch_id"])


def _diagnoses(store: RunStore) -> int:
    return sum(1 for r in store.list_runs(tenant_id=TENANT, limit=10_000)
               if r.intent is Intent.DIAGNOSIS)


def test_a_batch_over_200_runs_gives_one_result_per_run_and_changes_no_run(
    env: dict[str, str], batch_workers: Workers, store: RunStore, stored_url: str
) -> None:
    before = _runs_snapshot(stored_url)
    expected = _diagnoses(store)
    assert expected >= 200
    batch_workers.start(queues="batch", concurrency=2)
    batch_id = _reverify(env, "--chunk-size", "25")
    wait_for(lambda: store.get_batch(batch_id).status.terminal, timeout=240,
             what="the batch to end")
    batch = store.get_batch(batch_id)
    assert (batch.status, batch.total, batch.done, batch.failed) == (
        BatchStatus.COMPLETED, expected, expected, 0)
    items = list(store.iter_items(batch_id, tenant_id=TENANT))
    assert len(items) == len({i.run_id for i in items}) == expected
    assert all(i.status is ItemStatus.DONE for i in items)
    # the same agents and rules: every verdict and claim check as it was
    assert all(i.old_verdict == i.new_verdict for i in items)
    assert all(c.old == c.new for i in items for c in (i.detail.claims if i.detail else []))
    assert _runs_snapshot(stored_url) == before
    report = _cli(env, "reverify-report", batch_id, "--json")
    assert report.returncode == 0, report.stderr
    payload = json.loads(report.stdout)
    assert payload["judged"] == expected and payload["changed_verdicts"] == 0
    assert sum(sum(row.values()) for row in payload["transitions"].values()) == expected


def test_a_stricter_verifier_shows_as_transitions_in_the_report(
    env: dict[str, str], store: RunStore, tmp_path: Path
) -> None:
    strict = Workers(env={**env, "VERITY_RUNTIME_FACTORY":
                          "tests.integration.strict_runtime:build"}, log_dir=tmp_path)
    try:
        strict.start(queues="batch", concurrency=2)
        batch_id = _reverify(env, "--verdict", "PASS", "--limit", "40")
        wait_for(lambda: store.get_batch(batch_id).status.terminal, timeout=180,
                 what="the strict batch to end")
    finally:
        strict.stop_all()
    report = json.loads(_cli(env, "reverify-report", batch_id, "--json").stdout)
    assert report["judged"] == 40
    # no direct observation any more: every PASS can be at best LOW_CONFID
    assert report["transitions"] == {"PASS": {"PASS": 0, "LOW_CONFID": 40}}
    assert report["changed_verdicts"] == 40
    assert report["claim_class_changes"]["direct_observation -> reasonable_inference"] > 40
    worst = report["flips"][0]
    assert (worst["old_verdict"], worst["new_verdict"]) == ("PASS", "LOW_CONFID")
    assert any(c["new"] == "reasonable_inference" for c in worst["claims"])
    csv_file = tmp_path / "items.csv"
    assert _cli(env, "reverify-report", batch_id, "--csv", str(csv_file)).returncode == 0
    lines = csv_file.read_text().splitlines()
    assert len(lines) == 41 and lines[0].startswith("seq,run_id,status")


def test_a_worker_killed_mid_batch_leaves_exactly_one_result_per_item(
    env: dict[str, str], batch_workers: Workers, store: RunStore, stored_url: str
) -> None:
    before = _runs_snapshot(stored_url)
    first = batch_workers.start(queues="batch", concurrency=2)
    batch_id = _reverify(env, "--chunk-size", "10")
    wait_for(lambda: store.get_batch(batch_id).done >= 30, timeout=120,
             what="30 items judged")
    batch_workers.kill(first)  # SIGKILL: its chunks in flight stay unacked
    killed_at = store.get_batch(batch_id)
    assert killed_at.pending > 0
    batch_workers.start(queues="batch", concurrency=2)
    wait_for(lambda: store.get_batch(batch_id).status.terminal, timeout=240,
             what="the batch to end after the kill")
    batch = store.get_batch(batch_id)
    items = list(store.iter_items(batch_id, tenant_id=TENANT))
    errors = [(i.run_id, i.error) for i in items if i.status is not ItemStatus.DONE]
    assert batch.status is BatchStatus.COMPLETED, errors[:5]
    assert batch.done == batch.total == len(items) == len({i.run_id for i in items})
    assert all(i.status is ItemStatus.DONE for i in items)
    attempts = batch_attempts(store, batch_id)
    keys = [(a.run_id, a.role, a.cycle, a.attempt_number) for a in attempts]
    assert len(keys) == len(set(keys))  # no item's attempts written twice
    assert {a.run_id for a in attempts} == {i.run_id for i in items}
    assert _runs_snapshot(stored_url) == before


def test_a_cancel_mid_batch_stops_it(
    env: dict[str, str], batch_workers: Workers, store: RunStore
) -> None:
    batch_workers.start(queues="batch", concurrency=1)
    batch_id = _reverify(env, "--chunk-size", "5")
    wait_for(lambda: store.get_batch(batch_id).done >= 10, timeout=120, what="10 items judged")
    cancelled = _cli(env, "cancel", batch_id)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout, cancelled.stderr
    time.sleep(2.0)  # a chunk in flight lands its last few items, then stops
    settled = store.get_batch(batch_id).done
    time.sleep(2.0)
    batch = store.get_batch(batch_id)
    assert batch.status is BatchStatus.CANCELLED
    assert batch.done == settled < batch.total  # nothing new started
    assert batch.pending > 0
    assert os.environ.get("CI") is None or batch.finished_at is not None
    resumed = _reverify_resume(env, batch_id)
    assert resumed["status"] in ("RUNNING", "COMPLETED")
    wait_for(lambda: store.get_batch(batch_id).status is BatchStatus.COMPLETED, timeout=180,
             what="the resumed batch to complete")
    items = list(store.iter_items(batch_id, tenant_id=TENANT))
    assert len(items) == len({i.run_id for i in items}) == store.get_batch(batch_id).done


def _reverify_resume(env: dict[str, str], batch_id: str) -> dict[str, Any]:
    done = _cli(env, "reverify", "--resume", batch_id, "--json", "--no-wait")
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def test_verdicts_are_strings_the_report_knows() -> None:
    assert {v.value for v in Verdict} <= {"PASS", "LOW_CONFID", "REJECT"}
