"""The HTTP API over real HTTP against real workers, Redis and PostgreSQL (see conftest):
create, follow to the end, resume mid-run, cancel, page, tenants, tokens, limits, and a client
that disconnects while the Verifier's call is held 30 s."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from client import VerityClient
from models.common import Intent
from models.delivery import NewDelivery
from pipeline.errors import ConfigurationError, InputError, RunNotFoundError
from pipeline.store import open_store
from tests.api.conftest import MAX_BODY, RUNS_PER_MINUTE, TERMINAL, World, wait_for_run
from tests.api.sse import Frame, frames
from tests.store.samples import make_result

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

SOURCE = "scenario:checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"


@pytest.fixture(autouse=True)
def _no_latency(world: World) -> Iterator[None]:
    world.fake.set_latency(0.0)
    world.fake.set_latency(0.0, "verifier")
    yield
    world.fake.set_latency(0.0)
    world.fake.set_latency(0.0, "verifier")


def _create(http: httpx.Client, **body: object) -> str:
    response = http.post("/runs", json={"question": QUESTION, "source": SOURCE, **body})
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def _stored_seqs(world: World, run_id: str) -> list[int]:
    return [row[0] for row in world.query(
        "SELECT seq FROM run_event WHERE run_id = :r ORDER BY seq", r=run_id)]


def _follow(http: httpx.Client, run_id: str, *, headers: dict[str, str] | None = None,
            stop_after: int | None = None, after: int | None = None) -> list[Frame]:
    seen: list[Frame] = []
    params = {} if after is None else {"after": after}
    with http.stream("GET", f"/runs/{run_id}/events", headers=headers,
                     params=params) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for frame in frames(response):
            seen.append(frame)
            events = [f for f in seen if f.event == "run_event"]
            if stop_after is not None and len(events) >= stop_after:
                break  # leaving the block closes the connection
    return seen


def test_create_and_follow_to_the_end(world: World) -> None:
    with world.http(world.token()) as http:
        run_id = _create(http)
        seen = _follow(http, run_id)
    events = [f for f in seen if f.event == "run_event"]
    assert seen[-1].event == "end" and seen[-1].data["status"] in TERMINAL
    assert [int(f.id or 0) for f in events] == [f.data["seq"] for f in events]
    assert [f.data["seq"] for f in events] == _stored_seqs(world, run_id)
    assert seen[-1].data["status"] == "SUCCESS", seen[-1]


def test_resume_with_last_event_id_mid_run_has_no_gap_and_no_repeat(world: World) -> None:
    world.fake.set_latency(0.4)  # every model call: the run lasts seconds
    with world.http(world.token()) as http:
        run_id = _create(http)
        first = [f for f in _follow(http, run_id, stop_after=2) if f.event == "run_event"]
        assert http.get(f"/runs/{run_id}").json()["status"] not in TERMINAL  # mid-run
        last = first[-1].id
        assert last is not None
        rest = _follow(http, run_id, headers={"last-event-id": last})
        by_query = [f for f in _follow(http, run_id, after=int(last)) if f.event == "run_event"]
    resumed = [f for f in rest if f.event == "run_event"]
    seqs = [f.data["seq"] for f in first + resumed]
    assert seqs == list(range(1, len(seqs) + 1)) == _stored_seqs(world, run_id)
    assert rest[-1].event == "end"
    # the viewer that went away mid-run changed nothing: the run ended on its own
    assert rest[-1].data["status"] == "SUCCESS"
    assert [f.data["seq"] for f in first + by_query] == seqs


def test_after_query_resumes_and_json_page(world: World) -> None:
    with world.http(world.token()) as http:
        run_id = _create(http)
        wait_for_run(http, run_id)
        tail = [f for f in _follow(http, run_id, after=3) if f.event == "run_event"]
        page = http.get(f"/runs/{run_id}/events", params={"after": 3, "follow": "false"}).json()
    assert [f.data["seq"] for f in tail] == _stored_seqs(world, run_id)[3:]
    assert [e["seq"] for e in page["events"]] == _stored_seqs(world, run_id)[3:]


def test_keepalive_pings_while_nothing_happens(world: World) -> None:
    world.fake.set_latency(2.5, "verifier")  # the server pings every 1 s (conftest)
    with world.http(world.token()) as http:
        run_id = _create(http)
        seen = _follow(http, run_id)
    assert any(f.event == "comment" and f.data == "ping" for f in seen)
    assert seen[-1].event == "end"


def test_cancel(world: World) -> None:
    world.fake.set_latency(5.0, "verifier")
    with world.http(world.token()) as http:
        run_id = _create(http)
        said = http.post(f"/runs/{run_id}/cancel")
        assert said.status_code == 200 and said.json() == {"id": run_id, "cancelled": True}
        assert wait_for_run(http, run_id, timeout=10)["status"] == "CANCELLED"
        assert http.post(f"/runs/{run_id}/cancel").json()["cancelled"] is False
        assert _follow(http, run_id)[-1].data["status"] == "CANCELLED"


def test_list_with_keyset_paging(world: World) -> None:
    with world.http(world.token()) as http:
        created = [_create(http, session="s-1") for _ in range(RUNS_PER_MINUTE)]
        first = http.get("/runs", params={"limit": 2}).json()
        second = http.get("/runs", params={"limit": 2, "cursor": first["next_cursor"]}).json()
        by_session = http.get("/runs", params={"session": "s-1", "limit": 10}).json()
        other = http.get("/runs", params={"session": "s-2"}).json()
        bad = http.get("/runs", params={"cursor": "not-a-cursor"})
    assert len(first["runs"]) == 2 and first["next_cursor"]
    assert len(second["runs"]) == 1 and second["next_cursor"] is None
    listed = [r["run_id"] for r in first["runs"] + second["runs"]]
    assert listed == list(reversed(created))  # newest first, no overlap, none missing
    assert {r["run_id"] for r in by_session["runs"]} == set(created)
    assert other["runs"] == []
    assert bad.status_code == 422 and bad.json() == {"error": "cursor: not a cursor this API gave"}


def test_another_tenants_runs_are_404s(world: World) -> None:
    with world.http(world.token("tenant-a")) as a, world.http(world.token("tenant-b")) as b:
        run_id = _create(a)
        unknown = b.get("/runs/0123456789abcdef0123456789abcdef")
        for method, path in [("GET", f"/runs/{run_id}"), ("GET", f"/runs/{run_id}/events"),
                             ("POST", f"/runs/{run_id}/cancel"), ("GET", f"/runs/{run_id}/bundle")]:
            answer = b.request(method, path)
            assert answer.status_code == 404, (path, answer.text)
            assert answer.json() == {"error": f"no run with id {run_id!r}"}
        assert unknown.status_code == 404
        assert run_id not in {r["run_id"] for r in b.get("/runs").json()["runs"]}
        assert a.get(f"/runs/{run_id}").status_code == 200
        wait_for_run(a, run_id)
        assert a.get(f"/runs/{run_id}/bundle").status_code == 200


def test_tokens_missing_bad_and_revoked_are_401(world: World) -> None:
    created = world.cli("tokens", "create", "--tenant", "revoke-me", "--name", "web", "--json")
    assert created.returncode == 0, created.stderr
    import json

    token = json.loads(created.stdout)
    with world.http(token["secret"]) as http:
        assert http.get("/runs").status_code == 200
        revoked = world.cli("tokens", "revoke", token["token_id"])
        assert revoked.returncode == 0, revoked.stderr
        refused = http.get("/runs")
    assert refused.status_code == 401 and refused.json() == {"error": "invalid or revoked token"}
    with world.http("vrt_not-a-token") as http:
        assert http.get("/runs").status_code == 401
    with world.http() as http:
        missing = http.get("/runs/x")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert http.get("/healthz").json() == {"status": "ok", "checks": {}}
        ready = http.get("/readyz").json()
        assert ready == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}
    listed = json.loads(world.cli("tokens", "list", "--tenant", "revoke-me", "--json").stdout)
    assert [t["revoked_at"] is not None for t in listed["tokens"]] == [True]
    assert "secret" not in listed["tokens"][0] and token["secret"] not in created.stderr


def test_rate_limit_per_token(world: World) -> None:
    secret = world.token()
    with world.http(secret) as http, world.http(world.token()) as other:
        for _ in range(RUNS_PER_MINUTE):
            _create(http)
        refused = http.post("/runs", json={"question": QUESTION, "source": SOURCE})
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        assert "retry after" in refused.json()["error"]
        assert http.get("/runs").status_code == 200  # reads are not limited
        _create(other)  # another token has its own bucket


def test_request_limits_and_validation_are_one_line(world: World) -> None:
    with world.http(world.token()) as http:
        big = http.post("/runs", json={"question": "x" * MAX_BODY, "source": SOURCE})
        assert big.status_code == 413 and big.json()["error"].startswith("request body above")

        def chunks() -> Iterator[bytes]:
            yield b'{"question": "'
            yield b"y" * MAX_BODY
            yield b'", "source": "x"}'

        streamed = http.post("/runs", content=chunks(),
                             headers={"content-type": "application/json"})
        assert streamed.status_code == 413, streamed.text
        unknown = http.post("/runs", json={"question": QUESTION, "source": "scenario:nope"})
        assert unknown.status_code == 422
        assert unknown.json()["error"].startswith("unknown source 'scenario:nope' (shipped ")
        assert "\n" not in unknown.json()["error"]
        path = http.post("/runs", json={"question": QUESTION, "source": "../../etc"})
        assert path.status_code == 422
        extra = http.post("/runs", json={"question": QUESTION, "source": SOURCE, "x": 1})
        assert extra.status_code == 422 and list(extra.json()) == ["error"]
        assert "\n" not in extra.json()["error"]
        sources = http.get("/sources").json()["sources"]
        assert SOURCE in {s["name"] for s in sources}
        assert http.get("/openapi.json").json()["paths"]["/runs/{run_id}/events"]


def test_batches(world: World) -> None:
    with world.http(world.token("batcher")) as http, world.http(world.token()) as other:
        run_id = _create(http)
        wait_for_run(http, run_id)
        made = http.post("/batches", json={"provider": "offline", "chunk_size": 5})
        assert made.status_code == 202, made.text
        batch_id = made.json()["batch_id"]
        deadline = time.monotonic() + 60
        while http.get(f"/batches/{batch_id}").json()["status"] in ("PENDING", "RUNNING"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        report = http.get(f"/batches/{batch_id}/report").json()
        assert report["batch"]["batch_id"] == batch_id and report["batch"]["total"] >= 1
        assert other.get(f"/batches/{batch_id}").status_code == 404
        assert other.get(f"/batches/{batch_id}/report").status_code == 404
        assert http.post(f"/batches/{batch_id}/cancel").json()["cancelled"] is False


def test_http_client_has_the_producer_api(world: World) -> None:
    with VerityClient.from_url(world.base_url, world.token()) as client:
        run_id = client.submit(QUESTION, source=SOURCE, session_id="s")
        record = client.wait(run_id, timeout=60)
        assert record.status.value == "SUCCESS" and record.run_id == run_id
        events = client.events(run_id)
        assert [e.seq for e in events] == _stored_seqs(world, run_id)
        assert [e.seq for e in client.events(run_id, after=2)] == _stored_seqs(world, run_id)[2:]
        assert client.cancel(run_id) is False
        assert client.bundle(run_id).run_id == run_id
        with pytest.raises(RunNotFoundError):
            client.get("0" * 32)
        with pytest.raises(InputError, match="unknown source"):
            client.submit(QUESTION, source="nope")
    with VerityClient.from_url(world.base_url, "vrt_wrong") as client, pytest.raises(
            ConfigurationError, match="refused the token"):
        client.get(run_id)


def test_disconnect_during_a_held_model_call_cancels_the_run(world: World) -> None:
    world.fake.set_latency(30.0, "verifier")
    held = len(world.fake.requests_for("verifier"))
    with world.http(world.token()) as http:
        with http.stream("POST", "/runs", params={"stream": "true"},
                         json={"question": QUESTION, "source": SOURCE}) as response:
            assert response.status_code == 200, response.read()
            run_id = response.headers["x-verity-run-id"]
            seen = frames(response)
            assert next(seen).event == "created"
            deadline = time.monotonic() + 60
            while len(world.fake.requests_for("verifier")) <= held:  # the call is in flight
                assert time.monotonic() < deadline, "the Verifier was never called"
                time.sleep(0.05)
            assert http.get(f"/runs/{run_id}").json()["status"] == "RUNNING"
            gone = time.monotonic()
        # the stream is closed: the client went away
        record = wait_for_run(http, run_id, timeout=5)
        noticed = time.monotonic() - gone
        assert record["status"] == "CANCELLED", record
        assert noticed <= 1.5, f"CANCELLED {noticed:.2f}s after the disconnect"
        deadline = time.monotonic() + 5
        while not (rows := world.query(  # the journal's in_flight row, then the outcome
                "SELECT outcome FROM llm_attempt WHERE run_id = :r AND role = 'verifier' "
                "AND outcome <> 'in_flight'", r=run_id)):
            assert time.monotonic() < deadline, "the aborted Verifier call is not recorded"
            time.sleep(0.1)
        aborted = time.monotonic() - gone
        assert [row[0] for row in rows] == ["cancelled"]
        assert aborted <= 3.0, f"the held call was recorded {aborted:.2f}s after the disconnect"
        final = http.get(f"/runs/{run_id}").json()
        assert final["status"] == "CANCELLED" and final["final_answer"] is None
        assert final["verdict"] is None
    print(f"\ndisconnect -> CANCELLED {noticed:.3f}s; -> attempt recorded {aborted:.3f}s")


def test_a_runs_deliveries_are_its_tenants_only(world: World) -> None:
    with open_store(world.database_url) as store:
        run_id = store.create_run(tenant_id="notified", query="why?", intent=Intent.DIAGNOSIS)
        target = {"type": "slack", "url_env": "SLACK_URL", "when": "always"}
        store.finalize(run_id, make_result(run_id), deliveries=[NewDelivery(
            delivery_id="f" * 32, kind="slack", target=target, max_attempts=4)])
    with world.http(world.token("notified")) as mine, world.http(world.token()) as other:
        found = mine.get(f"/runs/{run_id}/deliveries")
        assert found.status_code == 200, found.text
        body = found.json()
        assert body["run_id"] == run_id
        assert [(d["delivery_id"], d["status"], d["attempts"], d["max_attempts"], d["target"])
                for d in body["deliveries"]] == [("f" * 32, "PENDING", 0, 4, target)]
        hidden = other.get(f"/runs/{run_id}/deliveries")
        assert hidden.status_code == 404
        assert hidden.json() == {"error": f"no run with id {run_id!r}"}
