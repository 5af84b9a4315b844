"""A built wheel works away from the checkout (issue 13, item 5).

The module builds the wheel from a copy of the source tree (`pip wheel --no-build-isolation`:
the dev extra brings setuptools and wheel, so no build dependency is fetched), installs it with
its dependencies into a fresh venv (pip's own configuration: the machine's wheel cache and
indexes, else PyPI) and drives the installed `verity` from a directory outside the repository
with PYTHONPATH unset: shipped scenarios, prompts and migrations must come from site-packages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from models.tables import Base
from pipeline.store import MIGRATIONS_DIR
from tests.conftest import stop_processes

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Why is checkout-service returning 500s?"
SCENARIO = "checkout-pool-exhaustion"
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    ".verity", "*.db", "tests",
)
_WHERE = """
import json, sysconfig
import fake_anthropic, pipeline.prompts, pipeline.scenarios, pipeline.store
print(json.dumps({
    "purelib": sysconfig.get_path("purelib"),
    "scenarios": str(pipeline.scenarios.default_scenarios_dir()),
    "migrations": str(pipeline.store.MIGRATIONS_DIR),
    "prompts": str(pipeline.prompts._DIR),
    "code": fake_anthropic.__file__,
}))
"""


@dataclass(frozen=True)
class Installed:
    """A fresh venv with the wheel installed, and a working directory outside the checkout."""

    venv: Path
    cwd: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment without the caller's PYTHON*/VERITY_*/ANTHROPIC_* settings."""
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("PYTHON", "VERITY_", "ANTHROPIC_", "VIRTUAL_ENV"))}
        return {**clean, "VERITY_PROVIDER": "offline", "VERITY_HOME": str(self.cwd / "home"),
                **extra}

    def run(self, *args: str, env: dict[str, str], timeout: float = 120) -> str:
        """Run a program of the venv (`verity`, `python`); its stdout, after exit status 0."""
        done = subprocess.run([str(self.venv / "bin" / args[0]), *args[1:]], cwd=self.cwd,
                              env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr[-3000:]}"
        return done.stdout


def _pip(python: Path | str, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--quiet", *args], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, f"pip {args[0]}: {done.stdout[-2000:]}{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build, install, and a working directory far from the repository."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCES)
    _pip(sys.executable, "wheel", str(source), "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(base / "dist"))
    (wheel,) = (base / "dist").glob("verity-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    _pip(venv / "bin" / "python", "install", str(wheel))
    cwd = base / "elsewhere"
    cwd.mkdir()
    return Installed(venv=venv, cwd=cwd)


def _run_json(installed: Installed, env: dict[str, str]) -> dict[str, object]:
    out = installed.run("verity", "run", QUESTION, "--scenario", SCENARIO, "--json", env=env)
    record: dict[str, object] = json.loads(out)
    assert (record["status"], record["verdict"]) == ("SUCCESS", "PASS")
    return record


def test_wheel__reads_its_data_from_site_packages(installed: Installed) -> None:
    where = json.loads(installed.run("python", "-c", _WHERE, env=installed.env()))
    purelib = Path(where.pop("purelib"))
    for name, path in where.items():
        assert Path(path).is_relative_to(purelib), f"{name}: {path}"
        assert not Path(path).resolve().is_relative_to(ROOT), f"{name}: {path}"
    assert (Path(where["scenarios"]) / SCENARIO / "scenario.json").is_file()
    assert sorted(p.name for p in (Path(where["migrations"]) / "versions").glob("0*.py")) == \
        sorted(p.name for p in (MIGRATIONS_DIR / "versions").glob("0*.py"))
    listed = installed.run("verity", "scenarios", env=installed.env())
    assert f"{SCENARIO}  {QUESTION}" in listed


def test_wheel__runs_exports_and_verifies_a_stored_run_on_sqlite(installed: Installed) -> None:
    database = installed.cwd / "sqlite" / "verity.db"
    env = installed.env(VERITY_DATABASE_URL=f"sqlite:///{database}")
    run_id = str(_run_json(installed, env)["run_id"])
    bundle = installed.cwd / "bundle.json"
    bundle.write_text(installed.run("verity", "export", run_id, env=env), encoding="utf-8")
    verified = json.loads(installed.run("verity", "verify", str(bundle), "--store", "--json",
                                        env=env))
    assert (verified["status"], verified["verdict"]) == ("SUCCESS", "PASS")
    assert verified["run_id"] != run_id
    shown = json.loads(installed.run("verity", "show", verified["run_id"], "--json", env=env))
    assert shown["run_id"] == verified["run_id"]
    engine = create_engine(f"sqlite:///{database}", poolclass=NullPool)
    try:
        with engine.connect() as connection:
            source = connection.execute(text("SELECT data_source FROM diagnosis_run "
                                             "WHERE run_id = :id"), {"id": run_id}).scalar_one()
    finally:
        engine.dispose()
    assert "site-packages" in source and not Path(source).is_relative_to(ROOT)


@pytest.fixture
def fresh_postgres_database(postgres_server_url: str) -> Iterator[str]:
    """A URL of a PostgreSQL database of its own (`verity_wheel_<random>`), dropped after."""
    name = f"verity_wheel_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_server_url).set(database=name).render_as_string(
            hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.mark.postgres
def test_wheel__migrates_a_fresh_postgres_database(
    installed: Installed, fresh_postgres_database: str
) -> None:
    env = installed.env(VERITY_DATABASE_URL=fresh_postgres_database)
    run_id = _run_json(installed, env)["run_id"]
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    engine = create_engine(fresh_postgres_database, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            revision = connection.execute(text("SELECT version_num FROM alembic_version"))
            assert revision.scalar_one() == head
            stored = connection.execute(text("SELECT status FROM diagnosis_run WHERE run_id = :id"),
                                        {"id": run_id})
            assert stored.scalar_one() == "SUCCESS"
        assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.postgres
@pytest.mark.redis
def test_wheel__a_worker_runs_the_diagnosis(
    installed: Installed, runtime_env: dict[str, str]
) -> None:
    keys = ("VERITY_BROKER_URL", "VERITY_RESULT_BACKEND", "VERITY_DATABASE_URL")
    env = installed.env(**{key: runtime_env[key] for key in keys})
    log = installed.cwd / f"worker-{uuid.uuid4().hex[:8]}.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(installed.venv / "bin" / "verity"), "worker", "--concurrency", "2",
             "--queues", "control,llm,tools"],
            cwd=installed.cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        _run_json(installed, env)
    finally:
        stop_processes([worker])
    assert b"verity.node.finalize" in log.read_bytes()
