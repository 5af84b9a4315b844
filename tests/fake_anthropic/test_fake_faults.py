"""Each injected fault surfaces through the official SDK as the matching exception; faults are
a FIFO per role consumed before the scripted replies."""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import anthropic
import pydantic
import pytest

from fake_anthropic import FAULT_NAMES, FakeAnthropic, parse_fault
from fake_anthropic.faults import FaultError
from tests.fake_anthropic.helpers import MODEL, USER, VERIFIER_TOOL, ask

STATUS_FAULTS = [
    pytest.param("400", anthropic.BadRequestError, "invalid_request_error", id="400-bad-request"),
    pytest.param("401", anthropic.AuthenticationError, "authentication_error", id="401-auth"),
    pytest.param("403", anthropic.PermissionDeniedError, "permission_error", id="403-permission"),
    pytest.param("404", anthropic.NotFoundError, "not_found_error", id="404-not-found"),
    pytest.param("429", anthropic.RateLimitError, "rate_limit_error", id="429-rate-limit"),
    pytest.param("500", anthropic.InternalServerError, "api_error", id="500-api-error"),
    pytest.param("529", anthropic.OverloadedError, "overloaded_error", id="529-overloaded"),
]


@pytest.mark.parametrize(("kind", "error", "error_type"), STATUS_FAULTS)
def test_faults__status_fault_raises_the_sdk_error(
    fake: FakeAnthropic,
    client: anthropic.Anthropic,
    kind: str,
    error: type[anthropic.APIStatusError],
    error_type: str,
) -> None:
    fake.fault("verifier", kind)
    with pytest.raises(error) as raised:
        ask(client, "verifier")
    assert raised.value.status_code == int(kind)
    body: Any = raised.value.body
    assert body["type"] == "error" and body["error"]["type"] == error_type
    assert body["request_id"] == raised.value.request_id
    assert fake.requests[0]["outcome"] == f"fault:{kind}"


def test_faults__429_carries_retry_after(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.fault("executor", "rate_limit", retry_after=7, message="slow down")
    with pytest.raises(anthropic.RateLimitError, match="slow down") as raised:
        ask(client, "executor")
    assert raised.value.response.headers["retry-after"] == "7"


def test_faults__529_is_an_api_status_error_and_a_server_error(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.fault("composer", 529)
    with pytest.raises(anthropic.APIStatusError) as raised:
        ask(client, "composer")
    assert isinstance(raised.value, anthropic.InternalServerError)
    assert raised.value.status_code == 529


def test_faults__hang_is_a_client_timeout_and_stop_does_not_wait_it_out() -> None:
    with (
        FakeAnthropic() as fake,
        anthropic.Anthropic(api_key="t", base_url=fake.base_url, max_retries=0) as sdk,
    ):
        fake.fault("verifier", "hang", seconds=60)
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            ask(sdk.with_options(timeout=0.3), "verifier")
        assert 0.25 < time.monotonic() - started < 2
    assert time.monotonic() - started < 3  # the 60 s hang ended with the server
    assert fake.requests[0]["outcome"] == "fault:hang" and fake.requests[0]["status"] is None


def test_faults__dropped_connection_is_a_connection_error(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.fault("planner", "drop_connection")
    with pytest.raises(anthropic.APIConnectionError) as raised:
        ask(client, "planner")
    assert not isinstance(raised.value, anthropic.APITimeoutError)


def test_faults__malformed_json_is_a_decode_error_in_the_sdk(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    # The SDK does not wrap it: a provider must catch ValueError around messages.create.
    fake.fault("verifier", "malformed_json")
    with pytest.raises(json.JSONDecodeError):
        ask(client, "verifier")
    raw = client.messages.with_raw_response
    fake.fault("verifier", "malformed_json")
    response = raw.create(
        model=MODEL,
        max_tokens=8,
        messages=USER,  # type: ignore[arg-type]
        extra_headers={"x-verity-role": "verifier"},
    )
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.http_response.text)


class _VerifierInput(pydantic.BaseModel):
    verdict: str
    score: float


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(VERIFIER_TOOL["input_schema"], {}, id="required-left-out"),
        pytest.param(
            {"type": "object", "properties": {"verdict": {"type": "string"}}},
            {"verdict": 12345},
            id="wrong-types-without-required",
        ),
    ],
)
def test_faults__schema_break_is_a_well_formed_message_breaking_the_schema(
    fake: FakeAnthropic, client: anthropic.Anthropic, schema: dict[str, Any], expected: object
) -> None:
    fake.fault("verifier", "schema_break")
    message = ask(
        client,
        tools=[VERIFIER_TOOL | {"input_schema": schema}],
        tool_choice={"type": "tool", "name": "submit_verifier_output"},
    )
    [block] = message.content
    assert (block.type, block.name, block.input) == ("tool_use", "submit_verifier_output", expected)
    assert message.stop_reason == "tool_use"
    with pytest.raises(pydantic.ValidationError):
        _VerifierInput.model_validate(block.input)


def test_faults__schema_break_with_a_chosen_input(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.fault("verifier", "schema_break", input={"verdict": "MAYBE"})
    tools = [VERIFIER_TOOL]
    message = ask(client, "verifier", tools=tools, tool_choice={"type": "any"})
    assert message.content[0].input == {"verdict": "MAYBE"}


def test_faults__consumed_before_replies_one_per_request_fifo(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("composer", ["the answer"])
    fake.faults("composer", ["429", {"fault": "529"}])
    fake.fault("planner", "500")
    with pytest.raises(anthropic.RateLimitError):
        ask(client, "composer")
    assert fake.pending() == {
        "replies": {"composer": 1},
        "faults": {"composer": [{"fault": "529"}], "planner": [{"fault": "500"}]},
    }
    with pytest.raises(anthropic.OverloadedError):
        ask(client, "composer")
    assert ask(client, "composer").content[0].text == "the answer"
    outcomes = [r["outcome"] for r in fake.requests_for("composer")]
    assert outcomes == ["fault:429", "fault:529", "scripted"]


def test_faults__times_repeats_a_fault(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.fault("verifier", "500", times=2)
    fake.script("verifier", "ok")
    for _ in range(2):
        with pytest.raises(anthropic.InternalServerError):
            ask(client, "verifier")
    assert ask(client, "verifier").content[0].text == "ok"


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("418", id="unknown-status"),
        pytest.param("explode", id="unknown-name"),
        pytest.param({"fault": "429", "retry": 2}, id="unknown-option"),
        pytest.param({"fault": "schema_break", "input": [1]}, id="input-not-object"),
        pytest.param(True, id="bool"),
    ],
)
def test_faults__unknown_faults_are_refused(fake: FakeAnthropic, spec: object) -> None:
    with pytest.raises(FaultError):
        fake.faults("planner", [spec])
    assert fake.pending()["faults"] == {}


def test_faults__every_name_parses() -> None:
    kinds = {parse_fault(name).kind for name in FAULT_NAMES}
    assert kinds == {
        "400", "401", "403", "404", "429", "500", "529",
        "hang", "drop_connection", "malformed_json", "schema_break", "expired", "canceled",
    }  # fmt: skip


def _post(fake: FakeAnthropic, headers: dict[str, str]) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": USER})
        connection.request("POST", "/v1/messages", body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_auth__missing_key_is_401(fake: FakeAnthropic) -> None:
    fake.script("default", "never sent")
    status, body = _post(fake, {"content-type": "application/json"})
    assert status == 401
    assert body["error"] == {
        "type": "authentication_error",
        "message": "x-api-key header is required",
    }
    assert _post(fake, {"x-api-key": "k"})[0] == 200


def test_auth__required_key_is_checked_through_the_sdk() -> None:
    with FakeAnthropic(required_key="right") as fake:
        fake.set_default_responder(lambda request: "ok")
        for key, works in (("wrong", False), ("right", True)):
            with anthropic.Anthropic(api_key=key, base_url=fake.base_url, max_retries=0) as sdk:
                if works:
                    assert ask(sdk).content[0].text == "ok"
                else:
                    with pytest.raises(anthropic.AuthenticationError, match="invalid x-api-key"):
                        ask(sdk)
        assert _post(fake, {"x-api-key": "right"})[0] == 200
