"""The API in this process (uvicorn in a thread, a SQLite store for tokens, a scripted client):
a failure is a one-line 500 with no internal text, 200 followers of one run share one poller,
and the pure parts (rate limiter, HTTP client errors)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn

from api import ApiSettings, create_app
from api.auth import RateLimited, RateLimiter
from client.http import HttpVerityClient
from models.common import Intent, RunStatus
from models.run import RunEvent, RunRecord
from pipeline.errors import (
    InputError,
    RateLimitedError,
    RunNotFoundError,
    StoreUnavailableError,
    VerityError,
)
from pipeline.store import RunStore, open_store
from pipeline.tokens import hash_secret, new_secret
from tests.api.conftest import free_port
from tests.api.sse import frames

LEAK = "password=hunter2 in /srv/verity/secret_module.py"
EVENTS = 6
STEP_S = 0.1


class ScriptedClient:
    """A tenant's client whose one run writes an event every STEP_S from its first read, then
    ends; counts reads."""

    def __init__(self, store: RunStore, tenant: str) -> None:
        self.runtime = SimpleNamespace(store=store)
        self.tenant = tenant
        self.started: float | None = None  # the run starts when it is first read
        self.reads = 0

    def get(self, run_id: str) -> RunRecord:
        if run_id == "boom":
            raise RuntimeError(LEAK)
        if run_id != "r1":
            raise RunNotFoundError(run_id)
        return RunRecord(run_id="r1", tenant_id=self.tenant, query="q", intent=Intent.DIAGNOSIS,
                         status=RunStatus.RUNNING, version=1)

    def follow(self, run_id: str, *, after: int = 0) -> tuple[RunStatus, list[RunEvent]]:
        self.reads += 1
        if self.started is None:
            self.started = time.monotonic()
        written = min(EVENTS, int((time.monotonic() - self.started) / STEP_S))
        events = [RunEvent(run_id=run_id, seq=seq, node="n", kind="k",
                           created_at=datetime.now(UTC)) for seq in range(after + 1, written + 1)]
        return (RunStatus.SUCCESS if written == EVENTS else RunStatus.RUNNING), events


class Served:
    """uvicorn serving an app in a thread."""

    def __init__(self, app: Any) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                                    log_level="critical"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str, dict[str, ScriptedClient]]]:
    store = open_store(f"sqlite:///{tmp_path / 'api.db'}")
    secret = new_secret()
    store.create_token(token_id="t1", tenant_id="team-a", name="test",
                       secret_sha256=hash_secret(secret))
    clients: dict[str, ScriptedClient] = {}

    def factory(tenant: str) -> Any:
        return clients.setdefault(tenant, ScriptedClient(store, tenant))

    app = create_app(factory, ApiSettings(poll_s=0.05, keepalive_s=5))
    with Served(app) as running:
        yield running, secret, clients
    store.close()


def test_a_failure_is_a_one_line_500_without_internal_text(served: Any) -> None:
    running, secret, _ = served
    answer = httpx.get(f"{running.url}/runs/boom", headers={"authorization": f"Bearer {secret}"})
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal error"}
    for leaked in ("hunter2", "Traceback", "secret_module", "RuntimeError"):
        assert leaked not in answer.text


def test_two_hundred_followers_of_one_run_share_one_poller(served: Any) -> None:
    running, secret, clients = served
    followers = 200

    async def follow(http: httpx.AsyncClient) -> list[Any]:
        async with http.stream("GET", "/runs/r1/events") as response:
            assert response.status_code == 200
            seen = []
            async for line in response.aiter_lines():
                seen.append(line)
            return seen

    async def everyone() -> list[list[Any]]:
        limits = httpx.Limits(max_connections=followers + 10)
        async with httpx.AsyncClient(base_url=running.url, limits=limits, timeout=30,
                                     headers={"authorization": f"Bearer {secret}"}) as http:
            return await asyncio.gather(*(follow(http) for _ in range(followers)))

    results = asyncio.run(everyone())
    expected = [f"id: {seq}" for seq in range(1, EVENTS + 1)]
    for lines in results:
        assert [line for line in lines if line.startswith("id: ")] == expected
        assert "event: end" in lines
    # the run lasts EVENTS * STEP_S = 0.6 s: about a dozen reads at 0.05 s a tick, for all 200
    reads = clients["team-a"].reads
    print(f"{reads} reads for {followers} followers")
    assert reads <= 40, f"{reads} reads for {followers} followers"


def test_an_unknown_run_is_404_before_any_stream(served: Any) -> None:
    running, secret, _ = served
    answer = httpx.get(f"{running.url}/runs/nope/events",
                       headers={"authorization": f"Bearer {secret}"})
    assert answer.status_code == 404 and answer.json() == {"error": "no run with id 'nope'"}


def test_a_bad_last_event_id_is_422(served: Any) -> None:
    running, secret, _ = served
    answer = httpx.get(f"{running.url}/runs/r1/events",
                       headers={"authorization": f"Bearer {secret}", "last-event-id": "x; 1"})
    assert answer.status_code == 422 and "Last-Event-ID" in answer.json()["error"]


def test_the_resumed_stream_starts_after_last_event_id(served: Any) -> None:
    running, secret, _ = served
    headers = {"authorization": f"Bearer {secret}", "last-event-id": "4"}
    with httpx.stream("GET", f"{running.url}/runs/r1/events", headers=headers) as response:
        ids = [f.id for f in frames(response) if f.event == "run_event"]
    assert ids == [str(seq) for seq in range(5, EVENTS + 1)]


def test_rate_limiter_is_a_token_bucket_per_key() -> None:
    now = [0.0]
    limiter = RateLimiter(3, clock=lambda: now[0])
    for _ in range(3):
        limiter.take("a")
    with pytest.raises(RateLimited) as refused:
        limiter.take("a")
    assert refused.value.retry_after_s == 20  # one comes back every 60/3 s
    limiter.take("b")
    now[0] = 20.0
    limiter.take("a")
    with pytest.raises(RateLimited):
        limiter.take("a")


@pytest.mark.parametrize(("status", "body", "error"), [
    pytest.param(404, {"error": "no run with id 'x'"}, RunNotFoundError, id="404-not-found"),
    pytest.param(422, {"error": "question: too short"}, InputError, id="422-input"),
    pytest.param(413, {"error": "request body above 10 bytes"}, InputError, id="413-input"),
    pytest.param(429, {"error": "too many"}, RateLimitedError, id="429-rate-limited"),
    pytest.param(503, {"error": "database unavailable"}, StoreUnavailableError, id="503"),
    pytest.param(500, {"error": "internal error"}, VerityError, id="500"),
])
def test_http_client_maps_answers_to_verity_errors(status: int, body: dict[str, str],
                                                   error: type[Exception]) -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(status, json=body, headers={"retry-after": "7"}))
    with HttpVerityClient("http://verity", "vrt_x", transport=transport) as client, \
            pytest.raises(error) as raised:
        client.get("x")
    assert body["error"] in str(raised.value) or status == 404
    if status == 429:
        assert isinstance(raised.value, RateLimitedError) and raised.value.retry_after_s == 7


def test_http_client_unreachable_server_is_store_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with HttpVerityClient("http://verity", "vrt_x", transport=httpx.MockTransport(refuse)) as c, \
            pytest.raises(StoreUnavailableError, match="unreachable"):
        c.get("x")


def test_serve_without_a_broker_is_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("VERITY_")}
    env["VERITY_HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "cli.main", "serve", "--port", "0"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "VERITY_BROKER_URL" in done.stderr
