"""Cancelling a model call over real HTTP (the fake server on 127.0.0.1): a request the server
holds for 30 s is aborted within about a second of the cancel, the calling thread gets
RunCancelledError, the helper thread ends with it, and the journaled attempt ends `cancelled`.
Without a token nothing changes: the call runs on the calling thread."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from fake_anthropic import FakeAnthropic
from models.common import Intent
from models.verifier import VerifierOutput
from pipeline.agents.claude import ClaudeVerifier
from pipeline.errors import RunCancelledError
from pipeline.providers.anthropic import AnthropicProvider
from pipeline.providers.messages import MessagesRequest
from pipeline.run.attempts import AttemptLog, RetryPolicy, call_with_retry
from pipeline.run.cancellation import CancelToken, bind
from pipeline.run.lease import LeaseKeeper
from pipeline.store import RunStore, open_store
from tests.providers.helpers import MODEL
from tests.spec.helpers import verifier_reply

TENANT = "team-a"
"""The owner of this module's runs."""

PAYLOAD = b'{"claims":[{"claim_id":"c1"}]}'
GOOD = verifier_reply("PASS", {"c1": "direct_observation"})
HELPER = "verity-model-call"


@pytest.fixture(scope="module")
def _running() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(hang_seconds=30.0) as running:
        yield running


@pytest.fixture
def fake(_running: FakeAnthropic) -> FakeAnthropic:
    _running.reset()
    return _running


@pytest.fixture
def provider(fake: FakeAnthropic) -> Iterator[AnthropicProvider]:
    built = AnthropicProvider(api_key="sk-test", base_url=fake.base_url, timeout_s=60.0,
                              connect_timeout_s=2.0)
    yield built
    built.close()


def _verify(provider: AnthropicProvider, log: AttemptLog) -> VerifierOutput:
    verifier = ClaudeVerifier(provider, MODEL,
                              policy=RetryPolicy(transient_max_retries=0)).retrying()
    return call_with_retry(verifier, role="verifier", payload=PAYLOAD,
                           parse=VerifierOutput.model_validate_json, log=log)


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == HELPER]


def _eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


class _Caller(threading.Thread):
    """A worker thread making one call with `token` bound; when it returned, and how."""

    def __init__(self, call: Callable[[], Any], token: CancelToken) -> None:
        super().__init__(daemon=True)
        self._call, self._token = call, token
        self.error: BaseException | None = None
        self.value: Any = None
        self.returned_at = 0.0

    def run(self) -> None:
        with bind(self._token):
            try:
                self.value = self._call()
            except BaseException as exc:  # handed to the test
                self.error = exc
        self.returned_at = time.monotonic()


def test_cancel__a_held_request_is_aborted_within_a_second_and_recorded_cancelled(
    fake: FakeAnthropic, provider: AnthropicProvider, store: RunStore
) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS)
    fake.fault("verifier", "hang", seconds=30)
    token = CancelToken()
    log = AttemptLog(run_id, journal=store)
    caller = _Caller(lambda: _verify(provider, log), token)
    caller.start()
    assert _eventually(lambda: len(fake.requests_for("verifier")) == 1)
    assert _eventually(lambda: store.list_attempts(run_id)[0].outcome == "in_flight")
    time.sleep(0.2)  # well inside the server's 30 s hold
    cancelled_at = time.monotonic()
    token.cancel("the run was cancelled")
    caller.join(timeout=5.0)
    assert not caller.is_alive()
    assert caller.returned_at - cancelled_at < 1.5
    assert isinstance(caller.error, RunCancelledError)
    assert "the run was cancelled" in str(caller.error)
    assert _eventually(lambda: not _helpers(), timeout=1.5)  # the request itself was aborted
    [row] = store.list_attempts(run_id)
    assert (row.outcome, row.error_type) == ("cancelled", "RunCancelledError")
    assert (row.input_tokens, row.output_tokens, row.cost_usd) == (0, 0, 0.0)
    assert row.latency_ms >= 200
    assert log.attempts == []
    assert len(fake.requests_for("verifier")) == 1  # never retried


def test_cancel__with_a_token_never_set_the_replies_come_back(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    reply = {"tool_use": {"name": "submit_verification", "input": json.loads(GOOD)}}
    fake.script("verifier", [reply] * 2)
    token = CancelToken()
    first = _Caller(lambda: [_verify(provider, AttemptLog("run-1")) for _ in range(2)], token)
    first.start()
    first.join(timeout=10.0)
    assert first.error is None and len(first.value) == 2
    assert all(out.verdict.value == "PASS" for out in first.value)
    requests = fake.requests_for("verifier")
    assert len(requests) == 2 and not _helpers()


def test_cancel__a_token_set_before_the_call_sends_nothing(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    token = CancelToken()
    token.cancel("the run was cancelled")
    caller = _Caller(lambda: _verify(provider, AttemptLog("run-1")), token)
    caller.start()
    caller.join(timeout=5.0)
    assert isinstance(caller.error, RunCancelledError)
    assert fake.requests_for("verifier") == []


def _request() -> MessagesRequest:
    return MessagesRequest(role="verifier", model=MODEL, system="s", max_tokens=10,
                           messages=[{"role": "user", "content": [{"type": "text",
                                                                   "text": "hi"}]}])


def test_no_token__the_request_runs_on_the_calling_thread() -> None:
    threads: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        threads.append(threading.current_thread().name)
        return httpx2.Response(200, json={
            "id": "msg_01", "type": "message", "role": "assistant", "model": MODEL,
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    provider = AnthropicProvider(api_key="sk-test", base_url="http://127.0.0.1:9",
                                 http_client=client)
    assert provider.send(_request()).text() == "ok"
    assert threads == [threading.current_thread().name]
    caller = _Caller(lambda: provider.send(_request()), CancelToken())
    caller.start()
    caller.join(timeout=5.0)
    assert caller.value.text() == "ok" and threads[-1] == HELPER


def test_cancel__a_callers_own_http_client_is_abandoned_not_aborted() -> None:
    release = threading.Event()

    def handler(request: httpx2.Request) -> httpx2.Response:
        release.wait(10)  # a transport that cannot be interrupted
        return httpx2.Response(500)

    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    provider = AnthropicProvider(api_key="sk-test", base_url="http://127.0.0.1:9",
                                 http_client=client)
    token = CancelToken()
    caller = _Caller(lambda: provider.send(_request()), token)
    caller.start()
    time.sleep(0.1)
    cancelled_at = time.monotonic()
    token.cancel("the run was cancelled")
    caller.join(timeout=5.0)
    assert isinstance(caller.error, RunCancelledError)
    assert caller.returned_at - cancelled_at < 1.0
    assert len(_helpers()) == 1  # left to finish; its reply is discarded
    release.set()
    assert _eventually(lambda: not _helpers())


def test_cancel__a_run_cancelled_in_the_store_interrupts_its_held_call(
    fake: FakeAnthropic, provider: AnthropicProvider, sqlite_url: str
) -> None:
    """The whole chain: the lease keeper's renewal sees the cancel (default period, 0.5 s),
    sets the token, the provider aborts the request."""
    with open_store(sqlite_url) as store:
        run_id = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS)
        keeper = LeaseKeeper(store, ttl_s=30.0, renew_s=0.5)
        fake.fault("verifier", "hang", seconds=30)
        outcome: dict[str, Any] = {}

        def node() -> None:
            with keeper.hold(run_id, 0) as held:
                outcome["acquired"] = held.acquired
                try:
                    _verify(provider, AttemptLog(run_id, journal=store))
                except RunCancelledError as exc:
                    outcome["error"], outcome["at"] = exc, time.monotonic()

        worker = threading.Thread(target=node, daemon=True)
        worker.start()
        assert _eventually(lambda: len(fake.requests_for("verifier")) == 1)
        cancelled_at = time.monotonic()
        assert store.cancel_run(run_id)
        worker.join(timeout=5.0)
        keeper.close()
        assert outcome["acquired"] and isinstance(outcome.get("error"), RunCancelledError)
        assert outcome["at"] - cancelled_at < 1.5
        assert [a.outcome for a in store.list_attempts(run_id)] == ["cancelled"]
        assert keeper.held() == []
