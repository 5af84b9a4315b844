"""The fake's Message Batches API through the official SDK (`client.messages.batches`): create,
poll, results at the batch's `results_url`, cancel, list, delete; each request answered as a
`/v1/messages` call of its role would be; faults per request and on the endpoints; records."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from fake_anthropic import BATCH_ROLE, FakeAnthropic, batch_role, count_input_tokens, role_of
from tests.fake_anthropic.helpers import MODEL, USER, VERIFIER_TOOL, ask

DELAY = 0.05


@pytest.fixture(scope="module")
def _running() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(hang_seconds=10.0, batch_delay=DELAY) as running:
        yield running


def params(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64, "messages": USER} | extra


def create(client: anthropic.Anthropic, *custom_ids: str, **extra: Any) -> Any:
    return client.messages.batches.create(
        requests=[{"custom_id": cid, "params": params(**extra)} for cid in custom_ids])


def wait_ended(client: anthropic.Anthropic, batch_id: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended" or time.monotonic() > deadline:
            return batch
        time.sleep(0.01)


def results(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    return {line.custom_id: line.result for line in client.messages.batches.results(batch_id)}


# -- the lifecycle -------------------------------------------------------------------------


def test_batches__in_progress_then_ended_with_results_at_results_url(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("verifier", ["first", "second"])
    created = create(client, "verifier__1", "verifier__2")
    assert created.id.startswith("msgbatch_01") and created.type == "message_batch"
    assert created.processing_status == "in_progress" and created.results_url is None
    assert created.request_counts.processing == 2 and created.request_counts.succeeded == 0
    assert client.messages.batches.retrieve(created.id).processing_status == "in_progress"
    ended = wait_ended(client, created.id)
    assert ended.processing_status == "ended"
    assert ended.request_counts.succeeded == 2 and ended.request_counts.processing == 0
    assert ended.results_url == f"{fake.base_url}/v1/messages/batches/{created.id}/results"
    assert ended.ended_at is not None and ended.ended_at >= ended.created_at
    assert (ended.expires_at - ended.created_at).total_seconds() == 24 * 3600
    got = results(client, created.id)
    assert {cid: r.type for cid, r in got.items()} == {
        "verifier__1": "succeeded", "verifier__2": "succeeded"}
    assert [got[c].message.content[0].text for c in ("verifier__1", "verifier__2")] == [
        "first", "second"]  # scripted replies consumed in request order
    assert got["verifier__1"].message.model == MODEL
    assert got["verifier__1"].message.usage.input_tokens > 0


def test_batches__a_request_is_answered_as_the_same_messages_call(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_default_responder(lambda body: {"text": f"{len(body['messages'])} message(s)"})
    direct = ask(client, "planner")
    fake.reset()
    fake.set_default_responder(lambda body: {"text": f"{len(body['messages'])} message(s)"})
    batch = create(client, "planner__1")
    message = results(client, wait_ended(client, batch.id).id)["planner__1"].message
    assert message.content[0].text == direct.content[0].text == "1 message(s)"
    assert message.usage.input_tokens == direct.usage.input_tokens == count_input_tokens(params())
    assert message.stop_reason == direct.stop_reason == "end_turn"


def test_batches__the_prompt_cache_is_the_servers(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_default_responder(lambda body: "ok")
    system = [{"type": "text", "text": "s" * 400, "cache_control": {"type": "ephemeral"}}]
    ask(client, "verifier", system=system)
    batch = create(client, "verifier__1", system=system)
    usage = results(client, wait_ended(client, batch.id).id)["verifier__1"].message.usage
    assert usage.cache_read_input_tokens > 0 and usage.cache_creation_input_tokens == 0


@pytest.mark.parametrize(
    ("custom_id", "extra", "role"),
    [
        pytest.param("composer__0001", {}, "composer", id="custom-id-prefix"),
        pytest.param("Verifier__x", {}, "verifier", id="custom-id-prefix-lower-cased"),
        pytest.param("c-1", {"tools": [VERIFIER_TOOL],
                             "tool_choice": {"type": "tool", "name": "submit_verifier_output"}},
                     "verifier", id="forced-tool"),
        pytest.param("plain-id", {}, "default", id="neither-default"),
        pytest.param("__7", {}, "default", id="empty-prefix-default"),
    ],
)
def test_batches__role_of_a_request(custom_id: str, extra: dict[str, Any], role: str) -> None:
    assert batch_role(custom_id, params(**extra), role_of) == role


def test_batches__role_picks_the_scripts_and_is_recorded(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("planner", "plan")
    fake.script("composer", "answer")
    batch = create(client, "composer__1", "planner__2")
    got = results(client, wait_ended(client, batch.id).id)
    assert got["composer__1"].message.content[0].text == "answer"
    assert got["planner__2"].message.content[0].text == "plan"
    assert [r["role"] for r in fake.batch_requests()] == ["composer", "planner"]
    assert [r["custom_id"] for r in fake.batch_requests("planner")] == ["planner__2"]


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "kind", "error_type"),
    [
        pytest.param("expired", "expired", None, id="expired"),
        pytest.param("canceled", "canceled", None, id="canceled"),
        pytest.param("errored", "errored", "api_error", id="errored-is-500"),
        pytest.param("429", "errored", "rate_limit_error", id="429-errored"),
        pytest.param("529", "errored", "overloaded_error", id="529-errored"),
        pytest.param("400", "errored", "invalid_request_error", id="400-errored"),
        pytest.param({"fault": "hang", "seconds": 5}, "expired", None, id="hang-expired"),
        pytest.param("drop_connection", "errored", "api_error", id="dropped-errored"),
        pytest.param("malformed_json", "errored", "api_error", id="malformed-errored"),
    ],
)
def test_batches__a_fault_shapes_one_requests_result(
    fake: FakeAnthropic, client: anthropic.Anthropic, fault: object, kind: str,
    error_type: str | None,
) -> None:
    fake.faults("verifier", [fault])
    fake.script("planner", "fine")
    batch = create(client, "planner__1", "verifier__2")
    started = time.monotonic()
    ended = wait_ended(client, batch.id)
    assert time.monotonic() - started < 2.0  # a hang is not waited in a batch
    got = results(client, ended.id)
    assert got["planner__1"].type == "succeeded"
    assert got["verifier__2"].type == kind
    assert getattr(ended.request_counts, kind) == 1 and ended.request_counts.succeeded == 1
    if error_type is not None:
        error = got["verifier__2"].error
        assert error.type == "error" and error.error.type == error_type
        assert error.request_id == fake.batch_requests("verifier")[0]["request_id"]


def test_batches__schema_break_succeeds_with_the_broken_input(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.fault("verifier", "schema_break")
    batch = create(client, "v-1", tools=[VERIFIER_TOOL],
                   tool_choice={"type": "tool", "name": "submit_verifier_output"})
    (block,) = results(client, wait_ended(client, batch.id).id)["v-1"].message.content
    assert block.type == "tool_use" and block.name == "submit_verifier_output"
    assert block.input == {}  # the schema's required properties are missing


def test_batches__invalid_params_are_an_errored_request(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("planner", "kept")
    batch = client.messages.batches.create(requests=[
        {"custom_id": "planner__1", "params": {"model": MODEL, "max_tokens": 8}},  # type: ignore[typeddict-item]
        {"custom_id": "planner__2", "params": params(stream=True)},  # type: ignore[typeddict-item]
    ])
    got = results(client, wait_ended(client, batch.id).id)
    assert got["planner__1"].error.error.type == "invalid_request_error"
    assert "messages: Field required" in got["planner__1"].error.error.message
    assert "stream" in got["planner__2"].error.error.message
    assert fake.pending()["replies"] == {"planner": 1}  # nothing consumed


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        pytest.param("429", anthropic.RateLimitError, id="429"),
        pytest.param("529", anthropic.OverloadedError, id="529"),
        pytest.param("500", anthropic.InternalServerError, id="500"),
    ],
)
def test_batches__faults_of_role_batch_hit_the_endpoint(
    fake: FakeAnthropic, client: anthropic.Anthropic, fault: str,
    error: type[anthropic.APIStatusError],
) -> None:
    fake.fault(BATCH_ROLE, fault, retry_after=4 if fault == "429" else None)
    with pytest.raises(error) as raised:
        create(client, "planner__1")
    assert raised.value.status_code == int(fault)
    if fault == "429":
        assert raised.value.response.headers["retry-after"] == "4"
    assert fake.batches == []
    assert create(client, "planner__1").processing_status == "in_progress"  # one fault, one call
    assert [r["outcome"] for r in fake.requests] == [f"fault:{fault}", "batch:create"]


def test_batches__a_fault_of_role_batch_can_hit_a_poll(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    batch = create(client, "planner__1")
    fake.fault(BATCH_ROLE, "529")
    with pytest.raises(anthropic.OverloadedError):
        client.messages.batches.retrieve(batch.id)
    assert client.messages.batches.retrieve(batch.id).id == batch.id


def test_batches__expired_on_a_plain_messages_call_is_a_500(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.fault("verifier", "expired")
    with pytest.raises(anthropic.InternalServerError, match="only to a request in a Message"):
        ask(client, "verifier")


# -- cancel, list, delete, validation ----------------------------------------------------------


def test_batches__cancel_in_progress_cancels_every_request(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_batch_delay(10.0)
    fake.script("planner", "never used")
    batch = create(client, "planner__1", "planner__2")
    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 2
    assert {r.type for r in results(client, batch.id).values()} == {"canceled"}
    assert fake.pending()["replies"] == {"planner": 1}
    # an ended batch stays as it is
    assert client.messages.batches.cancel(batch.id).request_counts.canceled == 2


def test_batches__results_before_the_end_are_refused(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_batch_delay(10.0)
    batch = create(client, "planner__1")
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client.messages.batches.results(batch.id)  # the SDK checks results_url first
    with pytest.raises(anthropic.BadRequestError, match="has not ended"):
        client.get(f"/v1/messages/batches/{batch.id}/results", cast_to=object)


def test_batches__list_newest_first_with_pages(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    ids = [create(client, f"planner__{n}").id for n in range(3)]
    page = client.messages.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2] and page.has_more
    assert [b.id for b in client.messages.batches.list(limit=2)] == ids[::-1]  # auto-paging
    assert [b.id for b in client.messages.batches.list(before_id=ids[0], limit=5).data] == ids[
        :0:-1]


def test_batches__delete_only_an_ended_batch(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_batch_delay(10.0)
    batch = create(client, "planner__1")
    with pytest.raises(anthropic.BadRequestError, match="cancel it first"):
        client.messages.batches.delete(batch.id)
    client.messages.batches.cancel(batch.id)
    assert client.messages.batches.delete(batch.id).type == "message_batch_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(batch.id)


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        pytest.param([], "at least one request", id="empty"),
        pytest.param([{"custom_id": "a", "params": params()}] * 2, "Duplicate custom_id",
                     id="duplicate-custom-id"),
        pytest.param([{"custom_id": "a.b", "params": params()}], "should match pattern",
                     id="custom-id-alphabet"),
        pytest.param([{"custom_id": "x" * 65, "params": params()}], "should match pattern",
                     id="custom-id-too-long"),
        pytest.param([{"custom_id": "a"}], "params: Field required", id="no-params"),
    ],
)
def test_batches__a_bad_create_is_a_400(
    fake: FakeAnthropic, client: anthropic.Anthropic, requests: list[Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=message):
        client.messages.batches.create(requests=requests)
    assert fake.batches == []


def test_batches__unknown_batch_is_404_and_key_is_checked(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve("msgbatch_01nope")
    with FakeAnthropic(required_key="right") as checking, anthropic.Anthropic(
            api_key="wrong", base_url=checking.base_url, max_retries=0) as wrong:
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.batches.list()
        assert checking.requests[0]["outcome"] == "authentication"


# -- records and configuration ---------------------------------------------------------------


def test_batches__every_call_and_request_is_recorded_and_reset_forgets(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("verifier", "v")
    batch = create(client, "verifier__1")
    results(client, wait_ended(client, batch.id).id)
    calls = fake.requests
    assert {r["role"] for r in calls} == {BATCH_ROLE}
    assert calls[0]["path"] == "/v1/messages/batches" and calls[0]["outcome"] == "batch:create"
    assert calls[0]["body"]["requests"][0]["custom_id"] == "verifier__1"
    assert calls[-1]["outcome"] == "batch:results" and calls[-1]["status"] == 200
    (recorded,) = fake.batches
    assert recorded["id"] == batch.id and recorded["processing_status"] == "ended"
    (item,) = recorded["requests"]
    assert item["body"] == params() and item["outcome"] == "scripted"
    assert item["result"]["message"]["content"] == [{"type": "text", "text": "v"}]
    assert fake.requests_for("verifier") == []  # batch requests are not /v1/messages calls
    fake.reset()
    assert fake.batches == [] and fake.batch_requests() == []


def test_batches__delay_is_configurable_and_reset_restores_it(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_batch_delay(0.3)
    batch = create(client, "planner__1")
    time.sleep(DELAY * 2)
    assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    assert wait_ended(client, batch.id).processing_status == "ended"
    fake.reset()
    quick = create(client, "planner__1")
    time.sleep(DELAY * 2)
    assert client.messages.batches.retrieve(quick.id).processing_status == "ended"


def test_batches__a_spawned_fake_serves_batches_and_reports_them() -> None:
    with FakeAnthropic.spawn(batch_delay=0.0, default_responder="minimal") as spawned, \
            anthropic.Anthropic(api_key="k", base_url=spawned.base_url, max_retries=0) as sdk:
        batch = create(sdk, "planner__1")
        assert results(sdk, batch.id)["planner__1"].message.content[0].text == "ok"
        (recorded,) = spawned.batches
        assert recorded["id"] == batch.id
        assert spawned.batch_requests("planner")[0]["outcome"] == "default"
        spawned.set_batch_delay(10.0)
        assert create(sdk, "planner__1").processing_status == "in_progress"
