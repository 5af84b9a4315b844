"""Every number a caller gives the API is bounded where it enters: an integer past a stored
column's range (PostgreSQL INTEGER), or a time that leaves years 1-9999 once in UTC, is the
one-line 422, never a 500 from the store. Checked two ways: the OpenAPI document gives every
integer a caller sends a minimum and a maximum, and each such value, one past its bound, is
sent to the app over a real PostgreSQL store."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api import ApiSettings, create_app
from client import VerityClient
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.tokens import hash_secret, new_secret

pytestmark = pytest.mark.postgres

MAX_INT32 = 2**31 - 1
"""PostgreSQL's INTEGER maximum (a run event's seq, for one)."""
TOO_BIG = MAX_INT32 + 1
SOURCE = "scenario:checkout-pool-exhaustion"
PAST_UTC = "0001-01-01T00:00:00+14:00"  # year 0 once in UTC
BEYOND_UTC = "9999-12-31T23:00:00-05:00"  # year 10000 once in UTC


@pytest.fixture(scope="module")
def api(postgres_server_url: str) -> Iterator[tuple[TestClient, str, str]]:
    """The app over a PostgreSQL store (no broker: nothing here reaches a worker), a token's
    secret and one of its tenant's runs."""
    from tests.conftest import fresh_schema

    with fresh_schema(postgres_server_url, "verity_bounds") as url:
        runtime = build_runtime(VeritySettings(database_url=url, provider="offline"))
        secret = new_secret()
        runtime.store.create_token(token_id="t-bounds", tenant_id="team-b", name="test",
                                   secret_sha256=hash_secret(secret))
        run_id = runtime.submit("Why?", tenant_id="team-b", source=SOURCE)
        app = create_app(lambda tenant: VerityClient(runtime, tenant=tenant),
                         ApiSettings(runs_per_minute=1000))
        try:
            with TestClient(app, raise_server_exceptions=False) as http:
                http.headers["authorization"] = f"Bearer {secret}"
                yield http, secret, run_id
        finally:
            runtime.store.close()


def _walk(where: str, schema: Any, components: dict[str, Any], seen: set[str]
          ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, schema) of `schema` and every schema in it, $refs followed once each."""
    if isinstance(schema, list):
        for item in schema:
            yield from _walk(where, item, components, seen)
        return
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            seen.add(name)
            yield from _walk(name, components[name], components, seen)
        return
    yield where, schema
    for key, value in schema.items():
        if key == "properties":
            for field, sub in value.items():
                yield from _walk(f"{where}.{field}", sub, components, seen)
        elif isinstance(value, dict | list):
            yield from _walk(where, value, components, seen)


def _inputs(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, schema) of every schema a caller's request is read by: parameters and request
    bodies, with their $refs followed."""
    components = document["components"]["schemas"]
    seen: set[str] = set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            label = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                yield from _walk(f"{label} {parameter['name']}", parameter["schema"],
                                 components, seen)
            for media in operation.get("requestBody", {}).get("content", {}).values():
                yield from _walk(f"{label} body", media["schema"], components, seen)


def test_every_integer_a_caller_sends_has_bounds(api: Any) -> None:
    http, _, _ = api
    document = http.get("/openapi.json").json()
    integers = [(where, schema) for where, schema in _inputs(document)
                if schema.get("type") == "integer"]
    names = {where for where, _ in integers}
    assert {"GET /runs/{run_id}/events after", "GET /runs/{run_id}/events Last-Event-ID",
            "GET /runs limit", "CreateBatch.chunk_size", "Selection.limit"} <= names, names
    unbounded = [where for where, schema in integers
                 if "minimum" not in schema or schema.get("maximum", TOO_BIG) > MAX_INT32]
    assert not unbounded, unbounded


def _forged_cursor(moment: str) -> str:
    raw = json.dumps([moment, "r"]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# (method, path, headers, body); "{run}" is a run of the token's tenant
PAST_THE_BOUND = [
    pytest.param("GET", f"/runs/{{run}}/events?follow=false&after={TOO_BIG}", {}, None,
                 id="after-known-run"),
    pytest.param("GET", f"/runs/nope/events?follow=false&after={TOO_BIG}", {}, None,
                 id="after-unknown-run"),
    pytest.param("GET", f"/runs/{{run}}/events?after={2**63}", {}, None, id="after-stream"),
    pytest.param("GET", "/runs/{run}/events?follow=false", {"last-event-id": str(TOO_BIG)},
                 None, id="last-event-id"),
    pytest.param("GET", "/runs/{run}/events?follow=false", {"last-event-id": "999999999999"},
                 None, id="last-event-id-12-digits"),
    pytest.param("GET", f"/runs?limit={10**30}", {}, None, id="limit"),
    pytest.param("POST", "/batches", {}, {"selection": {"limit": TOO_BIG}},
                 id="batch-selection-limit"),
    pytest.param("POST", "/batches", {}, {"chunk_size": TOO_BIG}, id="batch-chunk-size"),
    pytest.param("GET", f"/runs?since={PAST_UTC.replace('+', '%2B')}", {}, None,
                 id="since-before-year-1-in-utc"),
    pytest.param("GET", f"/runs?until={BEYOND_UTC}", {}, None, id="until-after-9999-in-utc"),
    pytest.param("GET", f"/runs?cursor={_forged_cursor(PAST_UTC)}", {}, None,
                 id="forged-cursor-time"),
    pytest.param("POST", "/batches", {}, {"selection": {"since": PAST_UTC}},
                 id="batch-selection-since"),
    pytest.param("POST", "/runs", {}, {"question": "Why?", "source": SOURCE,
                                       "options": {"at": BEYOND_UTC}}, id="run-at"),
]


@pytest.mark.parametrize(("method", "path", "headers", "body"), PAST_THE_BOUND)
def test_a_number_past_its_bound_is_a_one_line_422(api: Any, method: str, path: str,
                                                   headers: dict[str, str], body: Any) -> None:
    http, _, run_id = api
    answer = http.request(method, path.replace("{run}", run_id), headers=headers, json=body)
    assert answer.status_code == 422, answer.text
    assert list(answer.json()) == ["error"] and "\n" not in answer.json()["error"]
    assert "Traceback" not in answer.text and "internal" not in answer.text


def test_the_bound_itself_is_accepted(api: Any) -> None:
    http, _, run_id = api
    page = http.get(f"/runs/{run_id}/events", params={"follow": "false", "after": MAX_INT32})
    assert page.status_code == 200 and page.json()["events"] == []
    resumed = http.get(f"/runs/{run_id}/events", params={"follow": "false"},
                       headers={"last-event-id": str(MAX_INT32)})
    assert resumed.status_code == 200 and resumed.json()["events"] == []
    assert http.get("/runs", params={"limit": MAX_INT32}).status_code == 200
    assert http.get(f"/runs/{run_id}/events", params={"follow": "false"}).json()["events"]
