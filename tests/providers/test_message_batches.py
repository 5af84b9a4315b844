"""The batching provider over real HTTP (the fake server on 127.0.0.1, the official SDK in
`AnthropicProvider`): concurrent `send` calls become one Message Batch, each caller gets its own
answer; the batch's failures raise what a direct call would raise, or are re-sent as direct
calls with `fallback_to_messages`; timeouts, cancellation, close and the batch price."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pydantic
import pytest

from fake_anthropic import BATCH_ROLE, FakeAnthropic
from models.verifier import VerifierOutput
from pipeline.agents.claude import ClaudeVerifier
from pipeline.errors import (
    ConfigurationError,
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
    RunCancelledError,
)
from pipeline.providers.anthropic import AnthropicProvider
from pipeline.providers.batches import (
    BatchingProvider,
    BatchItem,
    BatchResult,
    BatchStatus,
    custom_id_for,
)
from pipeline.providers.messages import MessagesRequest, MessagesResponse, Usage
from pipeline.providers.pricing import DEFAULT_PRICES, DEFAULT_TABLE, cost_usd
from pipeline.run.attempts import call_with_retry
from pipeline.run.cancellation import CancelToken, bind
from tests.providers.helpers import MODEL, Sleeps, log
from tests.spec.helpers import verifier_reply

DISPATCHER = "verity-batch-dispatch"
PAYLOAD = b'{"claims":[{"claim_id":"c1"}]}'
GOOD = verifier_reply("PASS", {"c1": "direct_observation"})
GOOD_INPUT: dict[str, Any] = json.loads(GOOD)
Outcome = MessagesResponse | BaseException


@pytest.fixture(scope="module")
def _running() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(hang_seconds=5.0, batch_delay=0.05) as running:
        yield running


@pytest.fixture
def fake(_running: FakeAnthropic) -> FakeAnthropic:
    _running.reset()
    _running.set_default_responder(echo)
    return _running


@pytest.fixture(scope="module")
def direct(_running: FakeAnthropic) -> Iterator[AnthropicProvider]:
    built = AnthropicProvider(api_key="sk-test", base_url=_running.base_url, timeout_s=5.0,
                              connect_timeout_s=2.0)
    yield built
    built.close()


@pytest.fixture
def batching(fake: FakeAnthropic, direct: AnthropicProvider
             ) -> Iterator[Callable[..., BatchingProvider]]:
    """Makes batching providers on the direct one (fast polls); all closed after the test,
    and no dispatcher thread may outlive them."""
    made: list[BatchingProvider] = []

    def make(**options: Any) -> BatchingProvider:
        settings = {"poll_interval_s": 0.02, "flush_after_s": 0.05, "timeout_s": 10.0}
        provider = BatchingProvider(direct, **(settings | options))
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()
    assert [t for t in threading.enumerate() if t.name == DISPATCHER] == []


def echo(body: dict[str, Any]) -> object:
    return {"text": f"echo: {body['messages'][0]['content']}"}


def request(role: str, text: str, *, model: str = MODEL) -> MessagesRequest:
    return MessagesRequest(role=role, model=model, system="You answer tests.",
                           messages=[{"role": "user", "content": text}], max_tokens=64)


def send_all(provider: Any, requests: Sequence[MessagesRequest],
             token: CancelToken | None = None) -> list[Outcome]:
    """Each request sent from its own thread (with `token` bound); answers or errors, in order."""
    outcomes: list[Outcome | None] = [None] * len(requests)

    def one(index: int) -> None:
        with bind(token):
            try:
                outcomes[index] = provider.send(requests[index])
            except BaseException as exc:  # the test looks at it
                outcomes[index] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert not any(t.is_alive() for t in threads)
    return [o for o in outcomes if o is not None]


def answer(outcome: Outcome) -> MessagesResponse:
    assert isinstance(outcome, MessagesResponse), outcome
    return outcome


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


# -- one batch, each caller its own answer ---------------------------------------------------


def test_batches__n_threads_make_one_batch_and_each_gets_its_own_answer(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    n = 8
    provider = batching(max_batch=n, flush_after_s=30.0)  # only a full batch is sent
    requests = [request("verifier", f"question {i}") for i in range(n)]
    outcomes = send_all(provider, requests)
    (batch,) = fake.batches
    assert provider.batch_ids == [batch["id"]]
    assert len(batch["requests"]) == n and batch["request_counts"]["succeeded"] == n
    for i, outcome in enumerate(outcomes):
        response = answer(outcome)
        assert response.text() == f"echo: question {i}"
        assert response.batch_id == batch["id"] and response.request_id is None
        assert response.usage.batched and response.usage.input_tokens > 0
        assert response.latency_ms > 0 and response.model == MODEL
    custom_ids = [item["custom_id"] for item in batch["requests"]]
    assert len(set(custom_ids)) == n and all(c.startswith("verifier__") for c in custom_ids)
    assert {item["role"] for item in batch["requests"]} == {"verifier"}
    bodies = sorted((item["body"] for item in batch["requests"]),
                    key=lambda b: b["messages"][0]["content"])
    assert bodies == [r.body() for r in requests]  # each sent as `send` would post it
    assert fake.requests_for("verifier") == []  # no direct call


def test_batches__the_same_requests_through_the_normal_provider_give_the_same_content(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider], direct: AnthropicProvider
) -> None:
    requests = [request(role, f"{role} question") for role in ("planner", "verifier",
                                                                  "composer")]
    batched = [answer(o) for o in send_all(batching(max_batch=3), requests)]
    plain = [direct.send(r) for r in requests]
    assert [b.content for b in batched] == [p.content for p in plain]
    assert [b.stop_reason for b in batched] == [p.stop_reason for p in plain]
    assert [b.usage.total for b in batched] == [p.usage.total for p in plain]
    assert [p.batch_id for p in plain] == [None] * 3
    assert not any(p.usage.batched for p in plain)


def test_batches__max_batch_and_flush_after_split_the_calls(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    provider = batching(max_batch=2, flush_after_s=0.1)
    outcomes = send_all(provider, [request("planner", f"q{i}") for i in range(5)])
    assert [answer(o).text() for o in outcomes] == [f"echo: q{i}" for i in range(5)]
    sizes = [len(b["requests"]) for b in fake.batches]
    assert sum(sizes) == 5 and max(sizes) <= 2 and len(sizes) == len(provider.batch_ids)


def test_batches__a_lone_call_waits_flush_after_or_flush(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    provider = batching(flush_after_s=0.3)
    started = time.monotonic()
    assert answer(provider.send(request("planner", "alone"))).text() == "echo: alone"
    assert time.monotonic() - started >= 0.3
    slow = batching(flush_after_s=30.0)
    threading.Timer(0.1, slow.flush).start()
    started = time.monotonic()
    assert answer(slow.send(request("planner", "flushed"))).text() == "echo: flushed"
    assert time.monotonic() - started < 5.0


def test_batches__flush_with_nothing_waiting_does_not_hurry_the_next_call(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    provider = batching(max_batch=2, flush_after_s=30.0)
    provider.flush()
    outcomes = send_all(provider, [request("planner", "a"), request("planner", "b")])
    assert [answer(o).text() for o in outcomes] == ["echo: a", "echo: b"]
    assert [len(b["requests"]) for b in fake.batches] == [2]  # not a batch of the first alone


def test_batches__custom_ids_name_the_role_in_the_apis_alphabet() -> None:
    assert custom_id_for("verifier", 12) == "verifier__000012"
    assert custom_id_for("knowledge.base v2", 1) == "knowledge-base-v2__000001"
    assert custom_id_for("a__b", 1) == "a_b__000001"  # the separator stays unique
    assert len(custom_id_for("x" * 200, 10**9)) <= 64


# -- failures raise what a direct call raises --------------------------------------------------


@pytest.mark.parametrize("status", ["429", "529"], ids=["429-on-create", "529-on-create"])
def test_batches__a_refused_create_raises_the_normal_providers_error_to_every_caller(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider], direct: AnthropicProvider,
    status: str,
) -> None:
    fake.fault(BATCH_ROLE, status, retry_after=3)
    outcomes = send_all(batching(max_batch=3), [request("verifier", f"q{i}") for i in range(3)])
    assert all(isinstance(o, ProviderUnavailableError) and o.retry_after == 3.0
               for o in outcomes), outcomes
    assert f"HTTP {status}" in str(outcomes[0])
    assert fake.batches == []
    fake.fault("verifier", status, retry_after=3)
    with pytest.raises(ProviderUnavailableError) as raised:
        direct.send(request("verifier", "q"))
    assert raised.value.retry_after == 3.0  # the same error, the same wait


def test_batches__429_on_create_is_retried_by_the_runtime_into_a_new_batch(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.fault(BATCH_ROLE, "429", retry_after=2)
    fake.script("verifier", {"tool_use": {"name": "submit_verification", "input": GOOD_INPUT}})
    sleeps = Sleeps()
    attempts = log(sleeps)
    got = call_with_retry(ClaudeVerifier(batching(), MODEL).retrying(), role="verifier",
                          payload=PAYLOAD, parse=VerifierOutput.model_validate_json, log=attempts)
    assert got.verdict == "PASS"
    assert [a.outcome for a in attempts.attempts] == ["unavailable", "ok"]
    assert sleeps.waits == [2.0]
    assert [r["outcome"] for r in fake.requests if r["path"] == "/v1/messages/batches"] == [
        "fault:429", "batch:create"]


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        pytest.param("expired", ProviderUnavailableError, id="expired-unavailable"),
        pytest.param("canceled", ProviderUnavailableError, id="canceled-unavailable"),
        pytest.param("errored", ProviderUnavailableError, id="errored-500-unavailable"),
        pytest.param("429", ProviderUnavailableError, id="errored-429-unavailable"),
        pytest.param("529", ProviderUnavailableError, id="errored-529-unavailable"),
        pytest.param("400", ProviderRejectedError, id="errored-400-rejected"),
        pytest.param("404", ProviderRejectedError, id="errored-404-rejected"),
        pytest.param("403", ConfigurationError, id="errored-403-configuration"),
    ],
)
def test_batches__one_failed_request_raises_for_its_caller_only(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider], direct: AnthropicProvider,
    fault: str, error: type[Exception],
) -> None:
    fake.fault("verifier", fault)
    planner, verifier = send_all(batching(max_batch=2), [request("planner", "fine"),
                                                          request("verifier", "doomed")])
    assert answer(planner).text() == "echo: fine"
    assert type(verifier) is error, verifier
    assert "verifier__" in str(verifier) and fake.requests_for("verifier") == []
    if fault not in ("expired", "canceled"):  # a direct call with the same fault: same type
        fake.fault("verifier", fault)
        with pytest.raises(error):
            direct.send(request("verifier", "doomed"))


def test_batches__fallback_to_messages_resends_expired_and_errored_as_direct_calls(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.fault("verifier", "expired")
    fake.fault("composer", "errored")
    requests = [request("planner", "p"), request("verifier", "v"), request("composer", "c")]
    outcomes = send_all(batching(max_batch=3, fallback_to_messages=True), requests)
    planner, verifier, composer = (answer(o) for o in outcomes)
    assert planner.batch_id is not None and planner.usage.batched
    for response, role in ((verifier, "verifier"), (composer, "composer")):
        assert response.text() == f"echo: {role[0]}"
        assert response.batch_id is None and not response.usage.batched
        (sent,) = fake.requests_for(role)
        assert sent["path"] == "/v1/messages" and sent["headers"]["x-verity-role"] == role
        assert sent["body"] == requests[1 if role == "verifier" else 2].body()
    assert fake.requests_for("planner") == []


def test_batches__fallback_does_not_resend_a_rejected_request(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.fault("verifier", "400")
    (outcome,) = send_all(batching(fallback_to_messages=True), [request("verifier", "bad")])
    assert isinstance(outcome, ProviderRejectedError)
    assert fake.requests_for("verifier") == []  # the same bytes would be refused again


def test_batches__a_schema_breaking_reply_comes_back_and_the_parser_rejects_it(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    broken = {"tool_use": {"name": "submit_verification", "input": {"verdict": "MAYBE"}}}
    fake.script("verifier", [broken,
                             {"tool_use": {"name": "submit_verification", "input": GOOD_INPUT}}])
    provider = batching()
    claude = ClaudeVerifier(provider, MODEL)
    verifier = claude.retrying()
    attempts = log()
    got = call_with_retry(verifier, role="verifier", payload=PAYLOAD,
                          parse=VerifierOutput.model_validate_json, log=attempts)
    assert got.verdict == "PASS"
    assert [a.outcome for a in attempts.attempts] == ["invalid_output", "ok"]
    assert len(provider.batch_ids) == 2  # the technical retry went through a second batch
    first, second = fake.batch_requests("verifier")
    assert first["body"] == second["body"]  # byte-identical input on the retry
    fake.script("verifier", broken)
    (response,) = send_all(provider, [claude.answer_request(
        "verifier", system="s", content=[{"type": "text", "text": "x"}])])
    (use,) = answer(response).tool_uses("submit_verification")
    with pytest.raises(pydantic.ValidationError):
        VerifierOutput.model_validate(use["input"])


# -- polling, timeout, cancellation, close -----------------------------------------------------


def test_batches__a_transient_poll_error_is_polled_again(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(0.3)
    provider = batching(poll_interval_s=0.1)
    caller = threading.Thread(target=lambda: outcomes.append(
        provider.send(request("planner", "later"))))
    outcomes: list[MessagesResponse] = []
    caller.start()
    assert eventually(lambda: bool(provider.batch_ids))
    fake.faults(BATCH_ROLE, ["529", "500"])  # the next two polls
    caller.join(5.0)
    assert [o.text() for o in outcomes] == ["echo: later"]
    polls = [r["outcome"] for r in fake.requests if r["role"] == BATCH_ROLE][1:4]
    assert polls == ["fault:529", "fault:500", "batch:retrieve"]


def test_batches__a_refused_poll_fails_the_batchs_callers(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(0.3)
    provider = batching(poll_interval_s=0.1)
    outcomes: list[Outcome] = []
    caller = threading.Thread(target=lambda: outcomes.extend(
        send_all(provider, [request("planner", "x")])))
    caller.start()
    assert eventually(lambda: bool(provider.batch_ids))
    fake.fault(BATCH_ROLE, "404")
    caller.join(5.0)
    assert len(outcomes) == 1 and isinstance(outcomes[0], ProviderRejectedError)


def test_batches__timeout_while_polling_is_unavailable_and_cancels_the_batch(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(30.0)
    started = time.monotonic()
    (outcome,) = send_all(batching(timeout_s=0.3, poll_interval_s=0.05),
                          [request("verifier", "slow")])
    assert isinstance(outcome, ProviderUnavailableError)
    assert "did not end within 0.3 s" in str(outcome)
    assert time.monotonic() - started < 3.0
    (batch,) = fake.batches
    assert batch["cancel_initiated_at"] is not None
    assert any(r["outcome"] == "batch:cancel" for r in fake.requests)


def test_batches__cancel_frees_a_caller_waiting_for_its_batch_and_cancels_it(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(30.0)
    provider = batching()
    token = CancelToken()
    outcomes: list[Outcome] = []
    caller = threading.Thread(target=lambda: outcomes.extend(
        send_all(provider, [request("verifier", "v")], token)))
    caller.start()
    assert eventually(lambda: bool(provider.batch_ids))
    cancelled_at = time.monotonic()
    token.cancel("run cancelled")
    caller.join(5.0)
    assert time.monotonic() - cancelled_at < 1.0
    assert len(outcomes) == 1 and isinstance(outcomes[0], RunCancelledError)
    assert "run cancelled" in str(outcomes[0])
    # nobody waits for the batch any more: it is cancelled
    assert eventually(lambda: any(r["outcome"] == "batch:cancel" for r in fake.requests))


def test_batches__a_cancelled_caller_leaves_the_others_their_answers(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(0.4)
    provider = batching(max_batch=2)
    token = CancelToken()
    cancelled: list[Outcome] = []
    kept: list[Outcome] = []
    one = threading.Thread(target=lambda: cancelled.extend(
        send_all(provider, [request("verifier", "gone")], token)))
    two = threading.Thread(target=lambda: kept.extend(
        send_all(provider, [request("planner", "kept")])))
    one.start()
    two.start()
    assert eventually(lambda: bool(provider.batch_ids))
    token.cancel("lease lost")
    for thread in (one, two):
        thread.join(5.0)
    assert isinstance(cancelled[0], RunCancelledError)
    assert answer(kept[0]).text() == "echo: kept"
    assert not any(r["outcome"] == "batch:cancel" for r in fake.requests)


def test_batches__a_call_cancelled_before_the_flush_is_never_sent(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    provider = batching(flush_after_s=30.0)
    token = CancelToken()
    threading.Timer(0.1, token.cancel, args=("run cancelled",)).start()
    (outcome,) = send_all(provider, [request("verifier", "v")], token)
    assert isinstance(outcome, RunCancelledError)
    provider.close()
    assert fake.batches == [] and provider.batch_ids == []
    already = CancelToken()
    already.cancel("done")
    with bind(already), pytest.raises(RunCancelledError):
        batching().send(request("verifier", "v"))


def test_batches__close_fails_waiting_callers_cancels_their_batch_and_ends_the_thread(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider]
) -> None:
    fake.set_batch_delay(30.0)
    provider = batching()
    outcomes: list[Outcome] = []
    caller = threading.Thread(target=lambda: outcomes.extend(
        send_all(provider, [request("verifier", "v")])))
    caller.start()
    assert eventually(lambda: bool(provider.batch_ids))
    provider.close()
    caller.join(5.0)
    assert isinstance(outcomes[0], ProviderUnavailableError) and "closed" in str(outcomes[0])
    assert [t for t in threading.enumerate() if t.name == DISPATCHER] == []
    assert any(r["outcome"] == "batch:cancel" for r in fake.requests)
    with pytest.raises(ProviderUnavailableError, match="closed"):
        provider.send(request("verifier", "again"))


def test_batches__a_result_missing_from_the_file_is_invalid_output() -> None:
    class Forgetful:
        def send(self, request: MessagesRequest) -> MessagesResponse:
            raise AssertionError("no direct call")

        def create_batch(self, items: Sequence[BatchItem], *, timeout_s: float | None = None
                         ) -> BatchStatus:
            return BatchStatus("msgbatch_x", "in_progress")

        def retrieve_batch(self, batch_id: str, *, timeout_s: float | None = None
                           ) -> BatchStatus:
            return BatchStatus(batch_id, "ended")

        def batch_results(self, batch_id: str, *, timeout_s: float | None = None
                          ) -> list[BatchResult]:
            return [BatchResult("someone-else", "expired")]

        def cancel_batch(self, batch_id: str, *, timeout_s: float | None = None
                         ) -> BatchStatus:
            return BatchStatus(batch_id, "ended")

    provider = BatchingProvider(Forgetful(), flush_after_s=0.0, poll_interval_s=0.01)
    try:
        with pytest.raises(ProviderOutputInvalidError, match="no result for planner__000001"):
            provider.send(request("planner", "x"))
    finally:
        provider.close()


@pytest.mark.parametrize(
    "options",
    [{"max_batch": 0}, {"max_batch": 100_001}, {"poll_interval_s": 0}, {"timeout_s": -1},
     {"flush_after_s": -0.1}],
    ids=["max-batch-zero", "max-batch-past-the-api-limit", "poll-zero", "timeout-negative",
         "flush-negative"],
)
def test_batches__bad_settings_are_a_configuration_error(
    direct: AnthropicProvider, options: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        BatchingProvider(direct, **options)


# -- the SDK half and the price ----------------------------------------------------------------


def test_batches__the_anthropic_provider_speaks_the_batches_api(
    fake: FakeAnthropic, direct: AnthropicProvider
) -> None:
    fake.fault("composer", "529")
    created = direct.create_batch([BatchItem("planner__1", request("planner", "a")),
                                   BatchItem("composer__2", request("composer", "b"))])
    assert created.processing_status == "in_progress" and not created.ended
    assert created.request_counts == {"processing": 2, "succeeded": 0, "errored": 0,
                                      "canceled": 0, "expired": 0}
    assert eventually(lambda: direct.retrieve_batch(created.id).ended)
    ended = direct.retrieve_batch(created.id)
    assert ended.request_counts["succeeded"] == 1 and ended.request_counts["errored"] == 1
    assert ended.results_url is not None and ended.results_url.endswith("/results")
    results = {r.custom_id: r for r in direct.batch_results(created.id, timeout_s=2.0)}
    assert results["planner__1"].kind == "succeeded"
    assert results["planner__1"].response is not None
    assert results["planner__1"].response.batch_id == created.id
    assert results["composer__2"].kind == "errored"
    assert isinstance(results["composer__2"].error, ProviderUnavailableError)
    assert "overloaded" in str(results["composer__2"].error).lower()
    assert direct.cancel_batch(created.id).ended


def test_batches__a_rejected_key_on_create_is_a_configuration_error() -> None:
    with FakeAnthropic(required_key="right") as checking:
        wrong = AnthropicProvider(api_key="wrong", base_url=checking.base_url)
        try:
            with pytest.raises(ConfigurationError, match="401"):
                wrong.create_batch([BatchItem("planner__1", request("planner", "a"))])
        finally:
            wrong.close()


USAGE = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000,
              cache_write_tokens=400_000)


@pytest.mark.parametrize("model", sorted(DEFAULT_PRICES))
def test_batches__a_batched_call_costs_half(model: str) -> None:
    full = cost_usd(model, USAGE)
    batched = replace(USAGE, batched=True)
    assert full > 0
    assert cost_usd(model, batched) == pytest.approx(full / 2)
    assert DEFAULT_TABLE.cost_usd(model, USAGE, batch=True) == pytest.approx(full / 2)
    assert DEFAULT_TABLE.cost_usd(model, batched, batch=False) == pytest.approx(full)
    assert cost_usd("local-llama", batched) == 0.0


def test_batches__the_agents_attempt_row_is_priced_at_the_batch_rate(
    fake: FakeAnthropic, batching: Callable[..., BatchingProvider], direct: AnthropicProvider
) -> None:
    reply = {"tool_use": {"name": "submit_verification", "input": GOOD_INPUT}}
    rows = []
    for provider in (batching(), direct):
        fake.reset()  # the same cache state for both
        fake.script("verifier", reply)
        attempts = log()
        call_with_retry(ClaudeVerifier(provider, MODEL).retrying(), role="verifier",
                        payload=PAYLOAD, parse=VerifierOutput.model_validate_json, log=attempts)
        (row,) = attempts.attempts
        rows.append(row)
    batched, plain = rows
    assert batched.input_tokens == plain.input_tokens > 0
    assert batched.cache_write_tokens == plain.cache_write_tokens
    assert batched.cost_usd == pytest.approx(plain.cost_usd / 2)
