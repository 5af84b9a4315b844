"""Scripted replies through the official SDK over real HTTP: tool_use, text, raw bodies, FIFO
order per role, default responders, streaming and token counting."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import pytest

from fake_anthropic import FakeAnthropic, ReplyError
from tests.fake_anthropic.helpers import MODEL, VERIFIER_TOOL, ask

TOOL_USE_ID = re.compile(r"^toolu_01[0-9A-Za-z]{22}$")
MESSAGE_ID = re.compile(r"^msg_01[0-9A-Za-z]{22}$")
REQUEST_ID = re.compile(r"^req_01[0-9A-Za-z]{22}$")


def test_replies__tool_use_round_trip(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script("verifier", {"tool_use": {"name": "submit_verifier_output", "input": {"v": 1}}})
    raw = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=256,
        messages=[{"role": "user", "content": "check"}],
        tools=[VERIFIER_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "submit_verifier_output"},
    )
    message = raw.parse()
    assert REQUEST_ID.match(raw.headers["request-id"])
    assert MESSAGE_ID.match(message.id)
    assert (message.type, message.role, message.model) == ("message", "assistant", MODEL)
    assert message.stop_reason == "tool_use" and message.stop_sequence is None
    [block] = message.content
    assert block.type == "tool_use"
    assert TOOL_USE_ID.match(block.id)
    assert (block.name, block.input) == ("submit_verifier_output", {"v": 1})
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.cache_read_input_tokens == 0
    [recorded] = fake.requests
    assert recorded["role"] == "verifier" and recorded["outcome"] == "scripted"
    assert recorded["response"]["content"][0]["id"] == block.id


def test_replies__several_tool_uses_get_distinct_ids_after_the_text(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    uses = [{"name": "search_logs", "input": {"q": str(n)}} for n in range(3)]
    fake.script("executor", [{"text": "Looking.", "tool_use": uses}] * 2)
    blocks = ask(client, "executor").content + ask(client, "executor").content
    assert [b.type for b in blocks] == ["text"] + ["tool_use"] * 3 + ["text"] + ["tool_use"] * 3
    ids = [b.id for b in blocks if b.type == "tool_use"]
    assert len(set(ids)) == 6 and all(TOOL_USE_ID.match(i) for i in ids)
    assert [b.input for b in blocks[1:4]] == [{"q": "0"}, {"q": "1"}, {"q": "2"}]


def test_replies__a_given_tool_use_id_is_kept(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("executor", {"tool_use": {"id": "toolu_fixed", "name": "t", "input": {}}})
    assert ask(client, "executor").content[0].id == "toolu_fixed"


def test_replies__text_reply(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script("composer", ["The pool is exhausted.", {"text": "Second."}])
    first, second = ask(client, "composer"), ask(client, "composer")
    assert [b.text for b in first.content] == ["The pool is exhausted."]
    assert first.stop_reason == "end_turn"
    assert second.content[0].text == "Second."


@pytest.mark.parametrize("stop_reason", ["max_tokens", "refusal", "pause_turn", "stop_sequence"])
def test_replies__stop_reason_is_scriptable(
    fake: FakeAnthropic, client: anthropic.Anthropic, stop_reason: str
) -> None:
    fake.script("executor", {"text": "cut", "stop_reason": stop_reason, "stop_sequence": None})
    assert ask(client, "executor").stop_reason == stop_reason


def test_replies__raw_body_is_sent_as_given(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    body: dict[str, Any] = {
        "id": "msg_raw",
        "type": "message",
        "role": "assistant",
        "model": "other-model",
        "content": [{"type": "text", "text": "raw"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 3},
    }
    fake.script("planner", {"body": body})
    message = ask(client, "planner")
    assert (message.id, message.model, message.usage.input_tokens) == ("msg_raw", "other-model", 7)


def test_replies__usage_override(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script("planner", {"text": "x", "usage": {"output_tokens": 999}})
    assert ask(client, "planner").usage.output_tokens == 999


def test_replies__fifo_per_role_and_roles_independent(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("planner", ["p1", "p2"])
    fake.script("composer", ["c1"])
    texts = [ask(client, role).content[0].text for role in ("planner", "composer", "planner")]
    assert texts == ["p1", "c1", "p2"]
    assert fake.pending() == {"replies": {}, "faults": {}}


def test_replies__empty_queue_is_a_clear_500(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    with pytest.raises(
        anthropic.InternalServerError, match="no scripted reply for role 'verifier'"
    ):
        ask(client, "verifier")


def test_replies__default_responders_global_and_per_role(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    seen: list[dict[str, Any]] = []

    def echo(request: dict[str, Any]) -> object:
        seen.append(request)
        return f"echo {request['messages'][0]['content']}"

    fake.set_default_responder(echo)
    fake.set_default_responder(lambda request: "composer says hi", role="composer")
    fake.script("planner", "scripted first")
    assert ask(client, "planner").content[0].text == "scripted first"
    assert ask(client, "planner").content[0].text.startswith("echo Why is")
    assert ask(client, "composer").content[0].text == "composer says hi"
    assert len(seen) == 1 and seen[0]["model"] == MODEL
    assert [r["outcome"] for r in fake.requests] == ["scripted", "default", "default"]


def test_replies__a_raising_responder_is_a_500_naming_it(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    def broken(request: dict[str, Any]) -> object:
        raise KeyError("nope")

    fake.set_default_responder(broken)
    with pytest.raises(anthropic.InternalServerError, match="default responder"):
        ask(client, "planner")


def test_replies__minimal_responder_answers_the_forced_tool(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_default_responder("minimal")
    message = ask(
        client,
        tools=[VERIFIER_TOOL],
        tool_choice={"type": "tool", "name": "submit_verifier_output"},
    )
    assert message.content[0].input == {"verdict": "", "score": 0.0}


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(42, id="not-an-object"),
        pytest.param({"tool_use": {"input": {}}}, id="tool-use-without-name"),
        pytest.param({"text": "x", "stop_reason": "bored"}, id="unknown-stop-reason"),
        pytest.param({"txt": "x"}, id="unknown-key"),
        pytest.param({"body": {}, "text": "x"}, id="body-with-more"),
        pytest.param({"content": [], "text": "x"}, id="content-with-text"),
    ],
)
def test_replies__bad_replies_are_refused_when_scripted(fake: FakeAnthropic, reply: object) -> None:
    with pytest.raises(ReplyError):
        fake.script("planner", [reply])
    assert fake.pending()["replies"] == {}


def test_replies__streaming(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script("executor", {"text": "Looking.", "tool_use": {"name": "t", "input": {"a": [1]}}})
    with client.messages.stream(
        model=MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "go"}],
        extra_headers={"x-verity-role": "executor"},
    ) as stream:
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"a": [1]}
    assert message.stop_reason == "tool_use" and message.usage.output_tokens > 1
    assert TOOL_USE_ID.match(message.content[1].id)


def test_replies__count_tokens(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    counted = client.messages.count_tokens(
        model=MODEL, messages=[{"role": "user", "content": "x" * 398}]
    )
    assert counted.input_tokens == 100  # 398 characters + 2 quotes, 4 per token
