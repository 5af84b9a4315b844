"""The API's door, in this process (a SQLite store for tokens, a recording client): the token
is checked before anything of the request is read; a body refused for its content spends the
rate budget, an unauthenticated request or an oversized body does not; replicas on one Redis
share a token's budget; every response carries the security headers; no page loads anything
from a CDN."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api import ApiSettings, create_app
from pipeline.errors import BrokerUnavailableError, InputError
from pipeline.store import RunStore, open_store
from pipeline.tokens import hash_secret, new_secret
from tests.conftest import own_redis_db

STATIC = Path(__file__).resolve().parents[2] / "api" / "static"
RUN = {"question": "Why is checkout-service returning 500s?", "source": "scenario:x"}
BUDGET = 3
SECURITY_HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY",
                    "referrer-policy": "no-referrer"}
POLICY = ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
          "frame-ancestors 'none'")


class RecordingClient:
    """A tenant's client that accepts every run and records it; anything else is unknown."""

    def __init__(self, store: RunStore, tenant: str) -> None:
        self.runtime = SimpleNamespace(store=store)
        self.tenant = tenant
        self.submitted: list[str] = []

    def submit(self, query: str, **_: Any) -> str:
        self.submitted.append(query)
        return f"r{len(self.submitted)}"

    def get(self, run_id: str) -> Any:
        if run_id == "boom":
            raise RuntimeError("internal detail")
        raise InputError(f"no run with id {run_id!r}")

    def check(self, **_: Any) -> Any:
        raise InputError("not a transcript")


@pytest.fixture
def tokens(tmp_path: Path) -> Iterator[tuple[RunStore, str]]:
    """A token store with one live token; its secret."""
    store = open_store(f"sqlite:///{tmp_path / 'tokens.db'}")
    secret = new_secret()
    store.create_token(token_id="t1", tenant_id="team-a", name="test",
                       secret_sha256=hash_secret(secret))
    yield store, secret
    store.close()


def _app(store: RunStore, **settings: Any) -> tuple[Any, dict[str, RecordingClient]]:
    clients: dict[str, RecordingClient] = {}

    def factory(tenant: str) -> Any:
        return clients.setdefault(tenant, RecordingClient(store, tenant))

    chosen = ApiSettings(runs_per_minute=BUDGET, max_body_bytes=4096, **settings)
    return create_app(factory, chosen), clients


@pytest.fixture
def door(tokens: tuple[RunStore, str]) -> Iterator[tuple[TestClient, str, dict[str, Any]]]:
    """The app (in-process rate limit of BUDGET a minute), its secret and its clients."""
    store, secret = tokens
    app, clients = _app(store)
    with TestClient(app, raise_server_exceptions=False) as http:
        yield http, secret, clients


# -- the token first ---------------------------------------------------------------------------

BODIES = [
    pytest.param("/runs", b'{"question": ', id="runs-not-json"),
    pytest.param("/runs", b'{"question": 1, "x": [1, 2]}', id="runs-wrong-fields"),
    pytest.param("/runs", b"", id="runs-empty"),
    pytest.param("/checks", b'{"format": "nope"}', id="checks-wrong-format"),
    pytest.param("/batches", b'{"chunk_size": "many"}', id="batches-wrong-type"),
    pytest.param("/runs?stream=maybe", b"[]", id="runs-bad-query"),
]


@pytest.mark.parametrize(("path", "body"), BODIES)
@pytest.mark.parametrize("authorization", [None, "Bearer vrt_unknown", "Basic eDp5"],
                         ids=["no-token", "unknown-token", "not-bearer"])
def test_a_request_without_a_live_token_is_401_whatever_its_body(
        door: Any, path: str, body: bytes, authorization: str | None) -> None:
    http, _, clients = door
    headers = {"content-type": "application/json"}
    if authorization:
        headers["authorization"] = authorization
    answer = http.post(path, content=body, headers=headers)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"] in ("invalid or revoked token",
                                      "missing bearer token: send Authorization: Bearer <token>")
    assert answer.headers["www-authenticate"] == "Bearer"
    assert not any(c.submitted for c in clients.values())


def test_a_read_without_a_live_token_is_401_whatever_its_query(door: Any) -> None:
    http, _, _ = door
    for path in ("/runs?limit=abc", "/runs/x/events?after=-1&follow=perhaps", "/sources"):
        answer = http.get(path)
        assert answer.status_code == 401 and list(answer.json()) == ["error"], (path, answer.text)


def test_a_refused_body_spends_the_budget_an_unauthenticated_request_does_not(
        door: Any) -> None:
    http, secret, clients = door
    for _ in range(2 * BUDGET):  # no token, no budget spent
        assert http.post("/runs", json={"x": 1}).status_code == 401
    auth = {"authorization": f"Bearer {secret}"}

    def oversized() -> Iterator[bytes]:  # no Content-Length: refused while it is read
        yield b'{"question": "' + b"y" * 5000 + b'"}'

    too_big = http.post("/runs", content=oversized(), headers=auth)
    assert too_big.status_code == 413  # never judged: free
    bad = http.post("/runs", json={"question": ""}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"].startswith("question:")
    for _ in range(BUDGET - 1):
        assert http.post("/runs", json=RUN, headers=auth).status_code == 202
    refused = http.post("/runs", json=RUN, headers=auth)
    assert refused.status_code == 429, refused.text
    # once the bucket is empty, even a body that is not JSON is 429, unparsed
    unparsed = http.post("/runs", content=b"{",
                         headers={**auth, "content-type": "application/json"})
    assert unparsed.status_code == 429
    assert clients["team-a"].submitted == [RUN["question"]] * (BUDGET - 1)


# -- one budget for every replica on one Redis -------------------------------------------------

@pytest.fixture
def redis_db(redis_url: str) -> Iterator[str]:
    """A Redis database of this test's own."""
    with own_redis_db(redis_url) as url:
        yield url


@pytest.mark.redis
def test_two_replicas_on_one_redis_share_a_tokens_budget(tokens: Any, redis_db: str) -> None:
    from api.auth import RATE_KEY_PREFIX

    store, secret = tokens
    auth = {"authorization": f"Bearer {secret}"}
    first, _ = _app(store, redis_url=redis_db)
    second, _ = _app(store, redis_url=redis_db)
    with TestClient(first) as one, TestClient(second) as two:
        answers = [http.post("/runs", json=RUN, headers=auth).status_code
                   for http in (one, two, one, two, one)]
        assert answers == [202, 202, 202, 429, 429]
        refused = two.post("/runs", json=RUN, headers=auth)
        assert 1 <= int(refused.headers["retry-after"]) <= 60 // BUDGET
    kept = redis.Redis.from_url(redis_db)
    try:
        (key,) = kept.keys(f"{RATE_KEY_PREFIX}*")
        assert b"t1" not in key  # the token id is kept as its hash
        assert 0 < kept.pttl(key) <= (60 + 1) * 1000  # gone once the bucket is full again
    finally:
        kept.close()


@pytest.mark.redis
def test_another_token_on_the_same_redis_has_its_own_budget(redis_db: str) -> None:
    from api.auth import RedisRateLimiter

    limiter = RedisRateLimiter(redis_db, BUDGET)
    try:
        for _ in range(BUDGET):
            limiter.take("a")
        limiter.take("b")
    finally:
        limiter.close()


def test_without_redis_each_process_counts_alone(tokens: Any) -> None:
    store, secret = tokens
    auth = {"authorization": f"Bearer {secret}"}
    first, _ = _app(store)
    second, _ = _app(store)
    with TestClient(first) as one, TestClient(second) as two:
        for http in (one, two):
            assert [http.post("/runs", json=RUN, headers=auth).status_code
                    for _ in range(BUDGET + 1)] == [202] * BUDGET + [429]


def test_an_unreachable_rate_limit_store_is_503_not_a_free_pass(tokens: Any) -> None:
    store, secret = tokens
    app, clients = _app(store, redis_url="redis://127.0.0.1:1/0")
    with TestClient(app, raise_server_exceptions=False) as http:
        answer = http.post("/runs", json=RUN, headers={"authorization": f"Bearer {secret}"})
    assert answer.status_code == 503 and answer.json() == {
        "error": "broker unavailable: retry later"}
    assert not clients["team-a"].submitted
    from api.auth import RedisRateLimiter

    with pytest.raises(BrokerUnavailableError):
        RedisRateLimiter("redis://127.0.0.1:1/0", 1).take("x")


@pytest.mark.parametrize(("broker", "explicit", "shared"), [
    pytest.param("redis://127.0.0.1:6379/3", None, "redis://127.0.0.1:6379/3", id="broker"),
    pytest.param("rediss://cache:6380/0", None, "rediss://cache:6380/0", id="broker-tls"),
    pytest.param("redis://127.0.0.1:6379/3", "redis://limits/1", "redis://limits/1",
                 id="explicit-wins"),
    pytest.param(None, None, None, id="embedded"),
    pytest.param("memory://", None, None, id="memory"),
])
def test_serve_counts_in_the_brokers_redis(broker: str | None, explicit: str | None,
                                           shared: str | None) -> None:
    from api.settings import with_broker_redis

    chosen = with_broker_redis(ApiSettings(redis_url=explicit), broker)
    assert chosen.redis_url == shared


# -- the headers of every response, and no CDN -------------------------------------------------

RESPONSES = [
    pytest.param("GET", "/", None, 200, id="page"),
    pytest.param("GET", "/main.js", None, 200, id="script"),
    pytest.param("GET", "/style.css", None, 200, id="style"),
    pytest.param("GET", "/healthz", None, 200, id="healthz"),
    pytest.param("GET", "/openapi.json", None, 200, id="openapi"),
    pytest.param("GET", "/nowhere", None, 404, id="404"),
    pytest.param("GET", "/docs", None, 404, id="no-docs"),
    pytest.param("GET", "/redoc", None, 404, id="no-redoc"),
    pytest.param("GET", "/runs", {}, 401, id="401"),
    pytest.param("GET", "/runs/boom", None, 500, id="500"),
    pytest.param("GET", "/runs?session=%00", None, 422, id="422-nul"),
    pytest.param("POST", "/runs", {"question": "x" * 5000}, 413, id="413"),
]


@pytest.mark.parametrize(("method", "path", "body", "status"), RESPONSES)
def test_every_response_carries_the_security_headers(door: Any, method: str, path: str,
                                                     body: Any, status: int) -> None:
    http, secret, _ = door
    headers = {} if body == {} else {"authorization": f"Bearer {secret}"}
    answer = http.request(method, path, json=body or None, headers=headers)
    assert answer.status_code == status, answer.text
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers.get(name) == value, name
    policy = answer.headers.get("content-security-policy", "")
    assert all(part in policy for part in POLICY), policy
    if status >= 400:
        assert list(answer.json()) == ["error"]


def test_the_policy_lets_the_page_work_and_nothing_else() -> None:
    from api.headers import CONTENT_SECURITY_POLICY as policy

    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    # the page is its own files: no inline script or style, no handler attribute, no CDN
    for page in sorted(STATIC.glob("*.html")):
        html = page.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), page.name
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", html), page.name
        assert not re.search(r"(src|href)=\"(https?:)?//", html), page.name
    for script in sorted(STATIC.glob("*.js")):
        code = script.read_text()
        assert not re.search(r"\beval\(|new Function\(|setAttribute\(\s*[\"']style", code), \
            script.name
        assert not re.search(r"import[^;]*[\"']https?://", code), script.name


def test_the_openapi_document_is_served_and_no_page_loads_a_cdn(door: Any) -> None:
    http, _, _ = door
    assert http.get("/openapi.json").json()["paths"]["/runs"]
    for path in ("/", "/docs", "/redoc", "/docs/oauth2-redirect"):
        assert "cdn" not in http.get(path).text.lower(), path
