"""The OpenAI Chat Completions importer: the diagnosis transcript read exactly (ids, order,
results, unanswered calls, question, answer, model), each call a valid invocation, and every
malformed input a one-line TranscriptError that names its place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.importers.formats import parse_transcript
from pipeline.importers.openai import parse
from pipeline.importers.record import ImportedCall, ImportedRun
from tests.importers import incident
from tests.importers.incident import FAILED, FOUND

TRANSCRIPT = "openai_checkout_500s.json"
EXPECTED = incident.expected_run(
    "openai", agent="gpt-4.1-2025-04-14", ids=incident.CALL_IDS, metrics=incident.METRICS_TEXT,
    # Chat Completions has no error flag on a tool result: the forbidden rollout is no error
    rollout_is_error=False)


def _run(*messages: dict[str, Any]) -> str:
    return json.dumps({"model": "gpt-4.1", "messages": list(messages)})


def _user(content: Any = "Why 500s?") -> dict[str, Any]:
    return {"role": "user", "content": content}


def _assistant(content: Any = None, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def _call(call_id: Any, name: str = "kubectl_get_pods", arguments: Any = '{"ns": "shop"}',
          **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments}, **extra}


def _tool(call_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_openai__the_diagnosis_transcript_is_read_exactly() -> None:
    assert parse(incident.read(TRANSCRIPT)) == EXPECTED


def test_openai__parse_transcript_picks_the_openai_parser() -> None:
    assert parse_transcript(incident.read(TRANSCRIPT), "openai") == EXPECTED


def test_openai__every_call_is_a_valid_invocation() -> None:
    made = incident.invocations(parse, TRANSCRIPT, EXPECTED, [FOUND, FOUND, FOUND, FOUND, FAILED])
    metrics = made[1]
    assert metrics.projection is not None
    assert metrics.projection.model_dump()["result"]["values"] == [0.0, 12.4, 31.8]
    assert made[4].error == "the transcript holds no result for this call"


def test_openai__a_bare_array_with_text_parts_and_object_arguments() -> None:
    run = parse(json.dumps([
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        _user([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
               {"type": "text", "text": " Why 500s? "}]),
        _assistant(None, _call("call_1", arguments={"ns": "shop"}),
                   {"id": "call_2", "function": {"name": "search_logs", "arguments": "{}"}}),
        _tool("call_2", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        _tool("call_1", ""),
        _user("And now?"),
        _assistant([{"type": "text", "text": "Pool"}, {"type": "text", "text": "exhausted."}]),
    ]))
    assert run == ImportedRun(format="openai", answer="Pool\nexhausted.", question="Why 500s?",
                              agent=None, calls=(
        ImportedCall("call_1", "kubectl_get_pods", {"ns": "shop"}, result=""),
        ImportedCall("call_2", "search_logs", {}, result="a\nb"),
    ))


test_openai__a_malformed_fixture_is_refused_on_one_line_naming_the_place = (
    incident.refuses_fixtures(parse, [
        ("openai_not_json.json", "not JSON (Expecting value at line 5 column 38)"),
        ("openai_wrong_shape.json", "messages[1].tool_calls: expected an array, got an object"),
        ("openai_duplicate_id.json",
         "messages[3].tool_calls[0]: duplicate tool call id 'call_k8sPods2xQ7vLmN9pR4tW1yZ' "
         "(first at messages[1].tool_calls[0])"),
        ("openai_unknown_result.json",
         "messages[3]: tool message for unknown tool_call_id 'call_neverMade0'"),
        ("openai_bad_id.json",
         "messages[1].tool_calls[0]: tool call id 'call:pods#1' has characters outside "
         "[A-Za-z0-9_-]"),
        ("openai_bad_arguments.json",
         "messages[1].tool_calls[0].function.arguments (call call_k8sPods2xQ7vLmN9pR4tW1yZ, "
         "'kubectl_get_pods'): not JSON (Expecting value at line 1 column 35)"),
        ("openai_no_answer.json",
         "no final answer: the last assistant message (messages[3]) has no text content"),
    ]))


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
    ("3", "expected a Chat Completions request body (an object with messages) or an array of "
          "messages, got a number"),
    ("{}", "no messages: expected a Chat Completions request body (an object with messages)"),
    ('{"messages": null}', "messages: expected an array, got null"),
    ("[" * 65 + "]" * 65, "nests deeper than 64 levels"),
])
def test_openai__a_malformed_document_is_refused_on_one_line(text: str, message: str) -> None:
    assert incident.refused(parse, text) == message


@pytest.mark.parametrize(("messages", "message"), [
    ([{"role": "function", "name": "f", "content": "x"}],
     "messages[0].role: 'function' is not one of system, developer, user, assistant, tool"),
    ([{"content": "x"}],
     "messages[0].role: None is not one of system, developer, user, assistant, tool"),
    ([_user(None)], "messages[0]: content missing"),
    ([_user([{"text": "Why?"}])], "messages[0].content[0]: part type missing"),
    ([_user([{"type": "text", "text": 5}])],
     "messages[0].content[0]: text part's text is a number, not a string"),
    ([_user(), _assistant(None, _call(None))],
     "messages[1].tool_calls[0]: tool call id missing"),
    ([_user(), _assistant(None, _call("call 1"))],
     "messages[1].tool_calls[0]: tool call id 'call 1' has characters outside [A-Za-z0-9_-]"),
    ([_user(), _assistant(None, _call("call_1", type="custom"))],
     "messages[1].tool_calls[0]: tool call 'call_1' has type 'custom', not 'function'"),
    ([_user(), _assistant(None, {"id": "call_1", "type": "function"})],
     "messages[1].tool_calls[0].function: expected an object, got null"),
    ([_user(), _assistant(None, _call("call_1", name=""))],
     "messages[1].tool_calls[0].function: name is empty"),
    ([_user(), _assistant(None, _call("call_1", arguments='["shop"]'))],
     "messages[1].tool_calls[0].function.arguments (call call_1, 'kubectl_get_pods'): "
     "expected a JSON object, got an array"),
    ([_user(), _assistant(None, _call("call_1", arguments=None))],
     "messages[1].tool_calls[0].function.arguments (call call_1, 'kubectl_get_pods'): "
     "expected a JSON string, got null"),
    ([_user(), _assistant(None, _call("call_1", arguments=""))],
     "messages[1].tool_calls[0].function.arguments (call call_1, 'kubectl_get_pods'): "
     "not JSON (Expecting value at line 1 column 1)"),
    ([_user(), _assistant(None, _call("call_1", name="a\nb", arguments="{"))],
     "messages[1].tool_calls[0].function.arguments (call call_1, 'a\\nb'): not JSON "
     "(Expecting property name enclosed in double quotes at line 1 column 2)"),
    ([_user(), _assistant(None, _call("call_1")), {"role": "tool", "content": "x"}],
     "messages[2]: tool message tool_call_id missing"),
    ([_user(), _assistant(None, _call("call_1")), _tool("call_1", None)],
     "messages[2]: content missing"),
    ([_user(), _assistant(None, _call("call_1")), _tool("call_1"), _tool("call_1")],
     "messages[3]: second tool message for tool_call_id 'call_1' (first at messages[2])"),
    ([_user(), _assistant(None, _call("call_1"), _call("call_1"))],
     "messages[1].tool_calls[1]: duplicate tool call id 'call_1' "
     "(first at messages[1].tool_calls[0])"),
    ([_user(), _assistant("Checking the pods.", _call("call_1"))],
     "no final answer: the last assistant message (messages[1]) calls tools"),
    ([_user(), {"role": "assistant", "content": None, "refusal": "I can't help with that."}],
     "no final answer: the last assistant message (messages[1]) has no text content"),
    ([_user()], "no final answer: the transcript has no assistant message"),
])
def test_openai__a_malformed_message_is_refused_on_one_line_naming_the_place(
    messages: list[dict[str, Any]], message: str,
) -> None:
    assert incident.refused(parse, _run(*messages)) == message


def test_openai__any_change_to_the_transcript_parses_or_is_a_one_line_transcript_error() -> None:
    document = json.loads(incident.read(TRANSCRIPT))
    changes = incident.mutations(document, "[1]")
    counts = incident.outcomes(parse, (json.dumps(changed) for changed in changes))
    assert counts["parsed"] > 50 and counts["refused"] > 50


def test_openai__every_cut_of_the_transcript_is_a_one_line_transcript_error() -> None:
    for cut in incident.cuts(incident.read(TRANSCRIPT).rstrip(), 7):
        assert "\n" not in incident.refused(parse, cut)
