"""The Anthropic Messages importer: the diagnosis transcript read exactly (ids, order, results,
errors, unanswered calls, question, answer, model), each call a valid invocation, and every
malformed input a one-line TranscriptError that names its place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.importers.anthropic import parse
from pipeline.importers.formats import parse_transcript
from pipeline.importers.record import ImportedCall, ImportedRun
from tests.importers import incident
from tests.importers.incident import FAILED, FOUND

TRANSCRIPT = "anthropic_checkout_500s.json"
EXPECTED = incident.expected_run(
    "anthropic", agent="claude-sonnet-4-5-20250929",
    ids=("toolu_01A7kPodsQw3XbV9cN2mZ", "toolu_01B4hMetr8sYt2vLw6Jx", "toolu_01C9rLogs3eUc5xPz1nK",
         "toolu_01D2wRoll7jDf4kGsH8q", "toolu_01E6bTrac1mNq8hJyT5v"),
    metrics=incident.METRICS_TEXT, rollout_is_error=True)


def _run(*messages: dict[str, Any], model: str | None = None) -> str:
    body: dict[str, Any] = {"messages": list(messages)}
    if model is not None:
        body["model"] = model
    return json.dumps(body)


def _user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def _assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def _use(call_id: Any, name: str = "kubectl_get_pods") -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"namespace": "shop"}}


def _result(call_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def test_anthropic__the_diagnosis_transcript_is_read_exactly() -> None:
    assert parse(incident.read(TRANSCRIPT)) == EXPECTED


def test_anthropic__parse_transcript_picks_the_anthropic_parser() -> None:
    assert parse_transcript(incident.read(TRANSCRIPT), "anthropic") == EXPECTED


def test_anthropic__every_call_is_a_valid_invocation() -> None:
    pods, metrics, logs, rollout, traces = incident.invocations(
        parse, TRANSCRIPT, EXPECTED, [FOUND, FOUND, FOUND, FAILED, FAILED])
    assert pods.projection is not None and metrics.projection is not None
    assert pods.projection.model_dump()["lines"][3].startswith("checkout-service-7d9f8b6c5-tq4nm")
    assert metrics.projection.model_dump()["result"]["values"] == [0.0, 12.4, 31.8]
    assert rollout.error is not None and rollout.error.startswith("Error from server (Forbidden)")
    assert traces.error == "the transcript holds no result for this call"


def test_anthropic__a_bare_array_of_string_messages_is_a_run_without_a_model() -> None:
    run = parse(json.dumps([
        {"role": "user", "content": "  Why 500s?  "},
        _assistant(_use("toolu_1"), _use("toolu_2", "search_logs")),
        _user(_result("toolu_2", [_text("a"), {"type": "document", "source": {}},
                                  _text("b")]),
              _result("toolu_1", None)),
        {"role": "assistant", "content": " Pool exhausted. "},
    ]))
    assert run == ImportedRun(format="anthropic", answer="Pool exhausted.", question="Why 500s?",
                              agent=None, calls=(
        ImportedCall("toolu_1", "kubectl_get_pods", {"namespace": "shop"}, result=""),
        ImportedCall("toolu_2", "search_logs", {"namespace": "shop"}, result="a\nb"),
    ))


def test_anthropic__thinking_and_server_tool_blocks_are_left_out() -> None:
    run = parse(_run(
        _user(_text("Why 500s?"), {"type": "image", "source": {"type": "url", "url": "x"}}),
        _assistant(
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
             "input": {"query": "hikari pool exhausted"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
            _text("Pool exhausted."), _text("Raise the pool size.")),
    ))
    assert run.calls == ()
    assert run.answer == "Pool exhausted.\nRaise the pool size."
    assert run.question == "Why 500s?"


def test_anthropic__is_error_false_or_null_is_no_error() -> None:
    run = parse(_run(
        _user(_text("Why?")),
        _assistant(_use("toolu_1"), _use("toolu_2")),
        _user(_result("toolu_1", is_error=False), _result("toolu_2", is_error=None)),
        _assistant(_text("Done.")),
    ))
    assert [call.is_error for call in run.calls] == [False, False]


def test_anthropic__a_first_user_message_without_text_has_no_question() -> None:
    run = parse(_run(_user({"type": "image", "source": {}}), _assistant(_text("A cat."))))
    assert run.question is None


test_anthropic__a_malformed_fixture_is_refused_on_one_line_naming_the_place = (
    incident.refuses_fixtures(parse, [
        ("anthropic_not_json.json", "not JSON (Expecting ',' delimiter at line 5 column 26)"),
        ("anthropic_wrong_shape.json", "messages: expected an array, got an object"),
        ("anthropic_duplicate_id.json",
         "messages[3].content[0]: duplicate tool_use id 'toolu_01A7kPodsQw3XbV9cN2mZ' "
         "(first at messages[1].content[0])"),
        ("anthropic_unknown_result.json",
         "messages[2].content[1]: tool_result for unknown tool_use_id 'toolu_01Z0NeverCalled'"),
        ("anthropic_bad_id.json",
         "messages[1].content[1]: tool_use id 'toolu 01/pods' has characters outside "
         "[A-Za-z0-9_-]"),
        ("anthropic_no_answer.json",
         "no final answer: the last assistant message (messages[3]) has no text"),
    ]))


@pytest.mark.parametrize(("text", "message"), [
    ("", "not JSON (Expecting value at line 1 column 1)"),
    ('"just text"', "expected a Messages request body (an object with messages) or an array "
                    "of messages, got a string"),
    ('{"model": "claude"}',
     "no messages: expected a Messages request body (an object with messages)"),
    ('{"model": 4, "messages": []}', "model: model is a number, not a string"),
    ("[]", "no final answer: the transcript has no assistant message"),
    ('[{"role": "user", "content": "Why?"}, "hello"]', "[1]: expected an object, got a string"),
    ('[{"role": "system", "content": "Be brief."}]',
     "[0].role: 'system' is not 'user' or 'assistant'"),
    ('[{"role": "user"}]', "[0]: content missing"),
    ('[{"role": "user", "content": 7}]', "[0].content: expected an array, got a number"),
    ('[{"role": "user", "content": [{"text": "Why?"}]}]',
     "[0].content[0]: block type missing"),
    ('[{"role": "user", "content": [{"type": "text", "text": null}]}]',
     "[0].content[0]: text block's text is null, not a string"),
    ("[" * 65 + "]" * 65, "nests deeper than 64 levels"),
    ("[" * 100_000 + "]" * 100_000, "nests deeper than 64 levels"),
    ('[{"role": "user", "content": "\\ud800"}]',
     "has a \\u escape of a lone surrogate (not Unicode text)"),
    ('[{"role": "user", "content": NaN}]', "not JSON (NaN is not a JSON value)"),
])
def test_anthropic__a_malformed_document_is_refused_on_one_line(text: str, message: str) -> None:
    assert incident.refused(parse, text) == message


@pytest.mark.parametrize(("messages", "message"), [
    ([_user(_text("Why?")), _assistant({"type": "tool_use", "name": "x", "input": {}})],
     "messages[1].content[0]: tool_use id missing"),
    ([_user(_text("Why?")), _assistant(_use(""))], "messages[1].content[0]: tool_use id is empty"),
    ([_user(_text("Why?")), _assistant(_use(17))],
     "messages[1].content[0]: tool_use id is a number, not a string"),
    ([_user(_text("Why?")), _assistant(_use("t" * 129))],
     f"messages[1].content[0]: tool_use id '{'t' * 78}… is 129 characters (at most 128)"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1\nx"))],
     "messages[1].content[0]: tool_use id 'toolu_1\\nx' has characters outside [A-Za-z0-9_-]"),
    ([_user(_text("Why?")), _assistant({"type": "tool_use", "id": "toolu_1", "input": {}})],
     "messages[1].content[0]: tool_use name missing"),
    ([_user(_text("Why?")), _assistant({"type": "tool_use", "id": "toolu_1", "name": "x"})],
     "messages[1].content[0]: tool_use 'toolu_1' has no input"),
    ([_user(_text("Why?")),
      _assistant({"type": "tool_use", "id": "toolu_1", "name": "x", "input": "ns=shop"})],
     "messages[1].content[0].input: expected an object, got a string"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1")), _user(_result("toolu_1")),
      _user(_result("toolu_1"))],
     "messages[3].content[0]: second tool_result for tool_use_id 'toolu_1' "
     "(first at messages[2].content[0])"),
    ([_user(_result("toolu_1")), _assistant(_use("toolu_1"))],
     "messages[0].content[0]: tool_result for unknown tool_use_id 'toolu_1'"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1")),
      _user({"type": "tool_result", "content": "x"})],
     "messages[2].content[0]: tool_result tool_use_id missing"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1")),
      _user(_result("toolu_1", is_error="yes"))],
     "messages[2].content[0].is_error: expected a boolean, got a string"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1")), _user(_result("toolu_1", 42))],
     "messages[2].content[0].content: expected an array, got a number"),
    ([_user(_text("Why?")), _assistant(_use("toolu_1")),
      _user(_result("toolu_1", [{"type": "text"}]))],
     "messages[2].content[0].content[0]: text block's text is null, not a string"),
    ([_user(_text("Why?"), _use("toolu_1"))],
     "messages[0].content[1]: tool_use in a user message"),
    ([_user(_text("Why?")), _assistant(_result("toolu_1"))],
     "messages[1].content[0]: tool_result in an assistant message"),
    ([_user(_text("Why?")), _assistant(_text("Checking the pods."), _use("toolu_1"))],
     "no final answer: the last assistant message (messages[1]) calls tools"),
    ([_user(_text("Why?")), _assistant(_text("   "))],
     "no final answer: the last assistant message (messages[1]) has no text"),
])
def test_anthropic__a_malformed_message_is_refused_on_one_line_naming_the_place(
    messages: list[dict[str, Any]], message: str,
) -> None:
    assert incident.refused(parse, _run(*messages)) == message


def test_anthropic__any_change_to_the_transcript_parses_or_is_a_one_line_transcript_error(
) -> None:
    document = json.loads(incident.read(TRANSCRIPT))
    changes = incident.mutations(document)
    counts = incident.outcomes(parse, (json.dumps(changed) for changed in changes))
    assert counts["parsed"] > 50 and counts["refused"] > 50


def test_anthropic__every_cut_of_the_transcript_is_a_one_line_transcript_error() -> None:
    for cut in incident.cuts(incident.read(TRANSCRIPT).rstrip(), 7):
        assert "\n" not in incident.refused(parse, cut)
