"""Producer-side errors of `VerityClient`: each is a Verity error with a one-line message, raised
before anything is written or with the row removed again (issue 10, item 3)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from pipeline.config import VeritySettings
from pipeline.errors import (
    ConfigurationError,
    InputError,
    StoreUnavailableError,
)
from pipeline.factory import build_runtime
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore, make_engine
from tasks.client import VerityClient

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = default_scenarios_dir() / "checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def client(store: RunStore) -> Iterator[VerityClient]:
    """A client over the test's store (the in-process memory broker; nothing consumes)."""
    yield VerityClient(build_runtime(VeritySettings(), store=store))


def _source(kind: str, tmp_path: Path) -> str | None:
    """A data source of each bad kind."""
    if kind in ("none", "blank"):
        return None if kind == "none" else "  "
    path = tmp_path / kind
    if kind == "a-file":
        path.write_text("x", encoding="utf-8")
    elif kind != "missing":
        path.mkdir()
    if kind == "broken-scenario":
        (path / "scenario.json").write_text("{ not json", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("kind", "message"), [
    pytest.param("none", "submit needs a data_source", id="none"),
    pytest.param("blank", "submit needs a data_source", id="blank"),
    pytest.param("missing", "no scenario at", id="missing"),
    pytest.param("a-file", "no scenario at", id="a-file"),
    pytest.param("empty-folder", "no scenario at", id="not-a-scenario-folder"),
    pytest.param("broken-scenario", "scenario.json", id="broken-scenario"),
])
def test_submit__a_bad_data_source_is_one_line_and_writes_nothing(
    client: VerityClient, store: RunStore, tmp_path: Path, kind: str, message: str
) -> None:
    with pytest.raises(InputError) as raised:
        client.submit(QUESTION, data_source=_source(kind, tmp_path))
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert store.list_runs() == []


def test_submit__a_scenario_folder_is_stored_as_its_absolute_path(
    client: VerityClient, store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CHECKOUT.parent)
    run_id = client.submit(QUESTION, data_source=CHECKOUT.name)
    record = store.get_run(run_id)
    assert record.data_source == str(CHECKOUT.resolve())
    assert record.deadline_at is not None


def test_submit__a_runtime_with_its_own_source_loader_is_asked_instead(
    client: VerityClient, store: RunStore
) -> None:
    def loader(source: str | None) -> Any:
        if source != "warehouse:orders":
            raise KeyError(source)
        return object()

    client.runtime.source_loader = loader
    assert store.get_run(client.submit("q", data_source="warehouse:orders")).data_source == (
        "warehouse:orders")
    with pytest.raises(InputError, match=r"^data_source 'nope' cannot be loaded: KeyError"):
        client.submit("q", data_source="nope")
    assert len(store.list_runs()) == 1


@pytest.mark.postgres
def test_submit__a_database_that_is_down_is_store_unavailable(
    client: VerityClient, postgres_url: str
) -> None:
    url = make_url(postgres_url).set(port=_closed_port()).render_as_string(hide_password=False)
    client.runtime.store = RunStore(make_engine(url))
    try:
        with pytest.raises(StoreUnavailableError, match=r"^database unavailable: .*refused"):
            client.submit(QUESTION, data_source=str(CHECKOUT))
    finally:
        client.runtime.store.close()


def test_from_env__a_broker_without_a_shared_database_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VERITY_BROKER_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.delenv("VERITY_DATABASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="also set VERITY_DATABASE_URL"):
        VerityClient.from_env()


def _producer(env: dict[str, str], code: str) -> dict[str, Any]:
    prelude = ("import json\nfrom tasks.client import VerityClient\n"
               "client = VerityClient.from_env()\n")
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_submit__a_broker_that_is_down_leaves_no_row(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    env.update(VERITY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0",
               VERITY_DATABASE_URL=database_url)
    out = _producer(env, (
        "import time\nfrom pipeline.errors import BrokerUnavailableError\n"
        "start = time.monotonic()\n"
        "try:\n"
        f"    client.submit({QUESTION!r}, data_source={str(CHECKOUT)!r})\n"
        "    raised = None\n"
        "except BrokerUnavailableError as exc:\n"
        "    raised = str(exc)\n"
        "print(json.dumps({'raised': raised, 'seconds': time.monotonic() - start,"
        " 'runs': len(client.runtime.store.list_runs())}))\n"
    ))
    assert out["raised"] is not None and "\n" not in out["raised"]
    assert out["raised"].startswith("broker unavailable: ") and "refused" in out["raised"]
    assert out["seconds"] < 10  # a bounded publish retry, not minutes
    assert out["runs"] == 0
    with RunStore.open(database_url) as store:
        assert store.list_runs() == []


def test_submit__a_deadline_of_its_own_is_stored_and_a_bad_one_refused(
    client: VerityClient, store: RunStore
) -> None:
    run_id = client.submit(QUESTION, data_source=str(CHECKOUT), deadline_s=90)
    record = store.get_run(run_id)
    assert record.deadline_at is not None and record.created_at is not None
    assert abs((record.deadline_at - record.created_at).total_seconds() - 90) < 1
    default = store.get_run(client.submit(QUESTION, data_source=str(CHECKOUT)))
    assert default.deadline_at is not None and default.created_at is not None
    assert abs((default.deadline_at - default.created_at).total_seconds()
               - VeritySettings().run_deadline_s) < 1
    before = len(store.list_runs())
    with pytest.raises(InputError, match="deadline_s must be a positive number"):
        client.submit(QUESTION, data_source=str(CHECKOUT), deadline_s=0)
    assert len(store.list_runs()) == before
