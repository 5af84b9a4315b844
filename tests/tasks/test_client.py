"""Producer-side errors of `VerityClient`: each is a Verity error with a one-line message, raised
before anything is written or with the row removed again (issue 10, item 3)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from client import VerityClient
from client import local as client_module
from pipeline.config import VeritySettings
from pipeline.errors import (
    ConfigurationError,
    InputError,
    RunNotFoundError,
    StoreUnavailableError,
    UnknownSourceError,
)
from pipeline.factory import build_runtime
from pipeline.run.runtime import Runtime
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore, make_engine, open_store, store_for

TENANT = "team-a"
"""The owner of this module's runs."""

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
    yield VerityClient(build_runtime(VeritySettings(), store=store), tenant=TENANT)


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
    assert store.list_runs(tenant_id=TENANT) == []


def test_submit__a_scenario_folder_is_stored_as_its_absolute_path(
    client: VerityClient, store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CHECKOUT.parent)
    run_id = client.submit(QUESTION, data_source=CHECKOUT.name)
    record = store.get_run(run_id, tenant_id=TENANT)
    assert record.source == str(CHECKOUT.resolve())
    assert record.deadline_at is not None


def test_submit__a_runtime_with_its_own_source_loader_is_asked_instead(
    client: VerityClient, store: RunStore
) -> None:
    def loader(source: str | None) -> Any:
        if source != "warehouse:orders":
            raise KeyError(source)
        return object()

    client.runtime.source_loader = loader
    run_id = client.submit("q", data_source="warehouse:orders")
    assert store.get_run(run_id, tenant_id=TENANT).source == "warehouse:orders"
    with pytest.raises(InputError, match=r"^data_source 'nope' cannot be loaded: KeyError"):
        client.submit("q", data_source="nope")
    assert len(store.list_runs(tenant_id=TENANT)) == 1


@pytest.mark.postgres
def test_submit__a_database_that_is_down_is_store_unavailable(
    client: VerityClient, postgres_url: str
) -> None:
    url = make_url(postgres_url).set(port=_closed_port()).render_as_string(hide_password=False)
    client.runtime.store = store_for(make_engine(url))
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
    prelude = ("import json\nfrom client import VerityClient\n"
               "client = VerityClient.from_env()\n")
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_submit__a_broker_that_is_down_leaves_no_row(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    env.update(VERITY_BROKER_URL=f"redis://127.0.0.1:{_closed_port()}/0",
               VERITY_DATABASE_URL=database_url, VERITY_TENANT=TENANT)
    out = _producer(env, (
        "import time\nfrom pipeline.errors import BrokerUnavailableError\n"
        "start = time.monotonic()\n"
        "try:\n"
        f"    client.submit({QUESTION!r}, data_source={str(CHECKOUT)!r})\n"
        "    raised = None\n"
        "except BrokerUnavailableError as exc:\n"
        "    raised = str(exc)\n"
        "print(json.dumps({'raised': raised, 'seconds': time.monotonic() - start,"
        " 'runs': len(client.runtime.store.list_runs(tenant_id=client.tenant))}))\n"
    ))
    assert out["raised"] is not None and "\n" not in out["raised"]
    assert out["raised"].startswith("broker unavailable: ") and "refused" in out["raised"]
    assert out["seconds"] < 10  # a bounded publish retry, not minutes
    assert out["runs"] == 0
    with open_store(database_url) as store:
        assert store.list_runs(tenant_id=TENANT) == []


def test_submit__a_deadline_of_its_own_is_stored_and_a_bad_one_refused(
    client: VerityClient, store: RunStore
) -> None:
    run_id = client.submit(QUESTION, data_source=str(CHECKOUT), deadline_s=90)
    record = store.get_run(run_id, tenant_id=TENANT)
    assert record.deadline_at is not None and record.created_at is not None
    assert abs((record.deadline_at - record.created_at).total_seconds() - 90) < 1
    default = store.get_run(client.submit(QUESTION, data_source=str(CHECKOUT)), tenant_id=TENANT)
    assert default.deadline_at is not None and default.created_at is not None
    assert abs((default.deadline_at - default.created_at).total_seconds()
               - VeritySettings().run_deadline_s) < 1
    before = len(store.list_runs(tenant_id=TENANT))
    with pytest.raises(InputError, match="deadline_s must be a positive number"):
        client.submit(QUESTION, data_source=str(CHECKOUT), deadline_s=0)
    assert len(store.list_runs(tenant_id=TENANT)) == before


# -- tenants ------------------------------------------------------------------------------


@pytest.fixture
def env_runtime(client: VerityClient, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    """`from_env` builds no runtime of its own: it gets the test's."""
    for name in ("VERITY_BROKER_URL", "VERITY_DATABASE_URL", "VERITY_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(client_module, "get_runtime", lambda: client.runtime)
    return client.runtime


def test_from_env__the_tenant_given_else_verity_tenant(
    env_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigurationError, match=r"^no tenant: .*VERITY_TENANT$"):
        VerityClient.from_env()
    monkeypatch.setenv("VERITY_TENANT", "team-b")
    assert VerityClient.from_env().tenant == "team-b"
    assert VerityClient.from_env(tenant="team-c").tenant == "team-c"
    monkeypatch.setenv("VERITY_TENANT", "team b")
    with pytest.raises(InputError, match=r"^tenant id 'team b' may hold only"):
        VerityClient.from_env()


@pytest.mark.parametrize("tenant", ["", "a b", "x" * 129, "a/b", "t\n1"],
                         ids=["empty", "space", "too-long", "slash", "newline"])
def test_client__a_bad_tenant_id_is_one_line(client: VerityClient, tenant: str) -> None:
    with pytest.raises(InputError) as raised:
        VerityClient(client.runtime, tenant=tenant)
    assert str(raised.value).startswith("tenant id ") and "\n" not in str(raised.value)


def test_client__another_tenants_run_is_an_unknown_run(
    client: VerityClient, store: RunStore
) -> None:
    run_id = client.submit(QUESTION, data_source=str(CHECKOUT), session_id="sre-42")
    other = VerityClient(client.runtime, tenant="team-b")
    calls = {"get": other.get, "events": other.events, "cancel": other.cancel,
             "wait": lambda r: other.wait(r, timeout=1)}
    for name, call in calls.items():
        for target in (run_id, "no-such-run"):
            with pytest.raises(RunNotFoundError) as raised:
                call(target)
            assert str(raised.value) == f"no run with id {target!r}", name
    record = client.get(run_id)
    assert (record.tenant_id, record.cancel_requested) == (TENANT, False)
    assert [e.kind for e in client.events(run_id)] == ["accepted"]
    assert other.runtime.store.list_runs(tenant_id="team-b") == []


# -- named sources (issue 13) ----------------------------------------------------------------


@pytest.fixture
def sources_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    file = tmp_path / "config.toml"
    file.write_text('default_source = "demo"\n'
                    '[sources.prod.prometheus]\nurl = "http://prometheus.invalid:9090"\n'
                    '[sources.demo]\nscenario = "checkout-pool-exhaustion"\n', encoding="utf-8")
    monkeypatch.setenv("VERITY_CONFIG", str(file))
    return file


@pytest.mark.usefixtures("sources_file")
@pytest.mark.parametrize("name", ["nope", "scenario:nope", "prod@not-a-time"])
def test_submit__an_unknown_source_is_one_line_and_writes_nothing(
    client: VerityClient, store: RunStore, name: str
) -> None:
    with pytest.raises(InputError) as raised:
        client.submit(QUESTION, source=name)
    assert "\n" not in str(raised.value)
    assert store.list_runs(tenant_id=TENANT) == []


@pytest.mark.usefixtures("sources_file")
def test_submit__an_unknown_name_lists_the_configured_ones(client: VerityClient) -> None:
    with pytest.raises(UnknownSourceError, match=r"^unknown source 'nope' \(known: prod, demo; "):
        client.submit(QUESTION, source="nope")


@pytest.mark.usefixtures("sources_file")
def test_submit__a_configured_backend_source_is_pinned_at_submit_or_at(
    client: VerityClient, store: RunStore
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stored = store.get_run(client.submit(QUESTION, source="prod"), tenant_id=TENANT).source
    assert stored is not None and stored.startswith("prod@")
    pinned = datetime.fromisoformat(stored.removeprefix("prod@"))
    assert before <= pinned <= datetime.now(UTC)
    at = datetime(2026, 12, 1, 17, 0, tzinfo=UTC)
    run_id = client.submit(QUESTION, source="prod", at=at)
    assert store.get_run(run_id, tenant_id=TENANT).source == "prod@2026-12-01T17:00:00Z"


@pytest.mark.usefixtures("sources_file")
def test_submit__scenarios_keep_their_time_unless_at_is_given(
    client: VerityClient, store: RunStore
) -> None:
    def stored(**kw: Any) -> str | None:
        return store.get_run(client.submit(QUESTION, **kw), tenant_id=TENANT).source

    at = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)
    assert stored(source="demo") == "demo"
    assert stored(source="scenario:checkout-pool-exhaustion", at=at) == \
        "scenario:checkout-pool-exhaustion@2026-11-30T14:00:00Z"
    assert stored(data_source=str(CHECKOUT), at=at) == f"{CHECKOUT}@2026-11-30T14:00:00Z"
    assert stored() == "demo"  # the sources file's default_source


def test_submit__source_and_data_source_together_are_refused(
    client: VerityClient, store: RunStore
) -> None:
    with pytest.raises(InputError, match="a source or a data_source, not both"):
        client.submit(QUESTION, source="scenario:checkout-pool-exhaustion",
                      data_source=str(CHECKOUT))
    assert store.list_runs(tenant_id=TENANT) == []
