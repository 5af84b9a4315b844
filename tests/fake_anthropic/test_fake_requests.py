"""Requests: role attribution, the recorded log, and the validation the real API does (required
fields, tool_use / tool_result pairing) answered as 400 invalid_request_error."""

from __future__ import annotations

import http.client
import json
from typing import Any

import anthropic
import pytest

from fake_anthropic import FakeAnthropic, role_of
from tests.fake_anthropic.helpers import MODEL, USER, VERIFIER_TOOL, ask, post_raw


@pytest.mark.parametrize(
    ("headers", "tool_choice", "role"),
    [
        pytest.param({"x-verity-role": "Planner"}, None, "planner", id="header"),
        pytest.param(
            {}, {"type": "tool", "name": "submit_verifier_output"}, "verifier", id="forced"
        ),
        pytest.param({}, {"type": "tool", "name": "report"}, "report", id="forced-other-name"),
        pytest.param(
            {"x-verity-role": "composer"},
            {"type": "tool", "name": "submit_verifier_output"},
            "composer",
            id="header-wins",
        ),
        pytest.param({}, {"type": "any"}, "default", id="any-is-not-forced"),
        pytest.param({}, None, "default", id="nothing"),
    ],
)
def test_roles__attribution(
    headers: dict[str, str], tool_choice: dict[str, Any] | None, role: str
) -> None:
    assert role_of(headers, {"tool_choice": tool_choice}) == role


def test_roles__by_header_and_by_forced_tool_over_http(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("knowledge", "from the runbook")
    fake.script("verifier", {"tool_use": {"name": "submit_verifier_output", "input": {}}})
    fake.script("default", "untagged")
    assert ask(client, "knowledge").content[0].text == "from the runbook"
    forced = {"type": "tool", "name": "submit_verifier_output"}
    assert ask(client, tools=[VERIFIER_TOOL], tool_choice=forced).content[0].type == "tool_use"
    assert ask(client).content[0].text == "untagged"
    assert [r["role"] for r in fake.requests] == ["knowledge", "verifier", "default"]
    assert [r["role"] for r in fake.requests_for("verifier")] == ["verifier"]


def test_requests__recorded_in_order_with_bodies_and_headers(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_default_responder(lambda request: "ok")
    for n in range(3):
        ask(client, "planner", system=f"turn {n}", extra_headers={"x-run-id": "r1"})
    records = fake.requests
    assert [r["seq"] for r in records] == [0, 1, 2]
    assert [r["body"]["system"] for r in records] == ["turn 0", "turn 1", "turn 2"]
    assert all(r["headers"]["x-run-id"] == "r1" for r in records)
    assert all(r["path"] == "/v1/messages" and r["status"] == 200 for r in records)
    records[0]["body"]["system"] = "mutated"
    assert fake.requests[0]["body"]["system"] == "turn 0"


def test_requests__a_responder_gets_its_own_copy_of_the_request(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    def greedy(request: dict[str, Any]) -> str:
        text = request["messages"][0]["content"]
        request["messages"].clear()
        request["system"] = "rewritten"
        return f"read {text}"

    fake.set_default_responder(greedy)
    reply = ask(client, "planner", system="as sent")
    assert reply.content[0].text.startswith("read ")
    (record,) = fake.requests
    assert record["body"]["system"] == "as sent" and record["body"]["messages"]


def _assistant(*ids: str) -> dict[str, Any]:
    uses = [{"type": "tool_use", "id": i, "name": "search_logs", "input": {}} for i in ids]
    return {"role": "assistant", "content": uses}


def _results(*ids: str, is_error: bool = False) -> dict[str, Any]:
    blocks = [
        {"type": "tool_result", "tool_use_id": i, "content": "no hits", "is_error": is_error}
        for i in ids
    ]
    return {"role": "user", "content": blocks}


def test_validation__matching_tool_results_pass(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("executor", "done")
    messages = [*USER, _assistant("toolu_a", "toolu_b"), _results("toolu_b", "toolu_a")]
    assert ask(client, "executor", messages=messages).content[0].text == "done"
    messages = [*USER, _assistant("toolu_c"), _results("toolu_c", is_error=True)]
    fake.script("executor", "done again")
    assert ask(client, "executor", messages=messages).content[0].text == "done again"


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        pytest.param(
            [*USER, _assistant("toolu_a"), _results("toolu_x")],
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_x",
            id="result-for-unknown-id",
        ),
        pytest.param(
            [*USER, _assistant("toolu_a", "toolu_b"), _results("toolu_a")],
            "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_b",
            id="tool-use-left-unanswered",
        ),
        pytest.param(
            [*USER, _assistant("toolu_a"), _results("toolu_a"), _assistant("toolu_a")],
            "`tool_use` ids must be unique: toolu_a",
            id="duplicate-tool-use-id",
        ),
        pytest.param(
            [_results("toolu_a")],
            "unexpected `tool_use_id` found in `tool_result` blocks: toolu_a",
            id="result-without-previous-assistant",
        ),
        pytest.param(
            [*USER, _assistant("toolu_a"), {"role": "user", "content": "forgot the results"}],
            "without `tool_result` blocks immediately after: toolu_a",
            id="plain-user-turn-after-tool-use",
        ),
        pytest.param([{"role": "system", "content": "x"}], "messages.0.role", id="bad-role"),
        pytest.param([], "at least one message", id="no-messages"),
    ],
)
def test_validation__bad_conversations_are_400(
    fake: FakeAnthropic, client: anthropic.Anthropic, messages: list[Any], fragment: str
) -> None:
    fake.script("executor", "never sent")
    with pytest.raises(anthropic.BadRequestError) as raised:
        ask(client, "executor", messages=messages)
    body: Any = raised.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert fragment in body["error"]["message"]
    assert fake.pending()["replies"] == {"executor": 1}
    assert fake.requests[0]["outcome"] == "invalid_request"


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
def test_validation__required_fields(
    fake: FakeAnthropic, client: anthropic.Anthropic, missing: str
) -> None:
    body = {"model": MODEL, "max_tokens": 8, "messages": USER}
    del body[missing]
    with pytest.raises(anthropic.BadRequestError, match=f"{missing}: Field required"):
        post_raw(client, body)
    assert fake.requests[0]["body"] == body


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        pytest.param({"max_tokens": 0}, "max_tokens", id="max-tokens-zero"),
        pytest.param({"system": 3}, "system", id="system-not-text"),
        pytest.param({"tools": [{"name": "t"}]}, "input_schema", id="tool-without-schema"),
        pytest.param(
            {"tools": [VERIFIER_TOOL], "tool_choice": {"type": "tool", "name": "nope"}},
            "Tool 'nope' not found",
            id="forced-tool-not-offered",
        ),
    ],
)
def test_validation__bad_fields(
    client: anthropic.Anthropic, extra: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(anthropic.BadRequestError, match=fragment):
        post_raw(client, {"model": MODEL, "max_tokens": 8, "messages": USER} | extra)


def test_validation__a_body_that_is_not_json(fake: FakeAnthropic) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        connection.request("POST", "/v1/messages?beta=true", b"{nope", {"x-api-key": "k"})
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 400 and "not valid JSON" in body["error"]["message"]
    assert fake.requests[0]["body"] is None and fake.requests[0]["path"] == "/v1/messages"


def test_requests__beta_query_is_served(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script("planner", "beta ok")
    message = client.beta.messages.create(
        model=MODEL, max_tokens=8, messages=USER, extra_headers={"x-verity-role": "planner"}
    )
    assert message.content[0].text == "beta ok"
