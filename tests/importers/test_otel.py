"""The OTLP JSON (OpenTelemetry GenAI) importer: the diagnosis trace read exactly (ids, start
order, results from attributes and from tool_call_response parts, span errors, unanswered calls,
question, answer, model), each call a valid invocation, and every malformed input a one-line
TranscriptError that names its place."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.importers.formats import parse_transcript
from pipeline.importers.otel import parse
from pipeline.importers.record import ImportedCall, ImportedRun
from tests.importers import incident
from tests.importers.incident import FAILED, FOUND

TRACE = "5b8efff798038103d269b633813fc60c"
TRANSCRIPT = "otel_checkout_500s.jsonl"
EXPECTED = incident.expected_run(
    "otel", agent="gpt-4.1-2025-04-14", ids=incident.CALL_IDS, metrics=incident.METRICS,
    rollout_is_error=True, trace_id=TRACE, span_id="e1e2e3e4e5e6e7e8")


def _s(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def _span(name: str, start: int, attributes: list[dict[str, Any]], **extra: Any,
          ) -> dict[str, Any]:
    return {"traceId": TRACE, "spanId": f"{start:016x}", "name": name,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10),
            "attributes": attributes, **extra}


def _tool(call_id: str | None, start: int, *attributes: dict[str, Any],
          **extra: Any) -> dict[str, Any]:
    base = [_s("gen_ai.operation.name", "execute_tool"), _s("gen_ai.tool.name", "get_pods")]
    if call_id is not None:
        base.append(_s("gen_ai.tool.call.id", call_id))
    return _span("execute_tool get_pods", start, [*base, *attributes], **extra)


def _chat(start: int, inputs: Any, outputs: Any, *attributes: dict[str, Any]) -> dict[str, Any]:
    base = [_s("gen_ai.operation.name", "chat")]
    for key, messages in (("gen_ai.input.messages", inputs), ("gen_ai.output.messages", outputs)):
        if messages is not None:
            base.append(_s(key, messages if isinstance(messages, str) else json.dumps(messages)))
    return _span("chat", start, [*base, *attributes])


def _says(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "parts": list(parts)}


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


ASKED = [_says("user", _text("Why 500s?"))]
ANSWERED = [_says("assistant", _text("Pool exhausted."))]


def _trace(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [
        {"scope": {"name": "test"}, "spans": list(spans)}]}]}) + "\n"


def test_otel__the_diagnosis_trace_is_read_exactly() -> None:
    assert parse(incident.read(TRANSCRIPT)) == EXPECTED


def test_otel__parse_transcript_picks_the_otel_parser() -> None:
    assert parse_transcript(incident.read(TRANSCRIPT), "otel") == EXPECTED


def test_otel__one_pretty_printed_object_is_read_as_the_lines_are() -> None:
    lines = [json.loads(line) for line in incident.read(TRANSCRIPT).splitlines()]
    merged = {"resourceSpans": [rs for line in lines for rs in line["resourceSpans"]]}
    assert parse(json.dumps(merged, indent=2)) == EXPECTED


def test_otel__every_call_is_a_valid_invocation() -> None:
    made = incident.invocations(parse, TRANSCRIPT, EXPECTED, [FOUND, FOUND, FOUND, FAILED, FAILED])
    metrics = made[1]
    assert metrics.projection is not None
    assert metrics.projection.model_dump()["result"]["step_seconds"] == 300
    assert made[3].error is not None
    assert made[3].error.startswith("Error from server (Forbidden)")


@pytest.mark.parametrize(("extra", "error_text"), [
    ({"status": {"code": "STATUS_CODE_ERROR", "message": "timed out after 30s"}},
     "timed out after 30s"),
    ({"status": {"code": 2},
      "events": [{"name": "exception", "attributes": [
          _s("exception.type", "TimeoutError"), _s("exception.message", "read timed out")]}]},
     "read timed out"),
])
def test_otel__a_failed_span_without_a_result_keeps_its_error(
    extra: dict[str, Any], error_text: str,
) -> None:
    run = parse(_trace(_tool("call_1", 100, **extra), _chat(50, ASKED, ANSWERED)))
    assert run.calls == (ImportedCall("call_1", "get_pods", {}, result=error_text,
                                      is_error=True),)


def test_otel__an_error_type_alone_marks_the_call_failed() -> None:
    run = parse(_trace(_tool("call_1", 100, _s("error.type", "PermissionError"),
                             status={"code": 1}),
                       _chat(50, ASKED, ANSWERED)))
    assert run.calls == (ImportedCall("call_1", "get_pods", {}, result="PermissionError",
                                      is_error=True),)


def test_otel__a_structured_result_and_messages_are_read_as_json() -> None:
    messages = {"arrayValue": {"values": [{"kvlistValue": {"values": [
        {"key": "role", "value": {"stringValue": "assistant"}},
        {"key": "parts", "value": {"arrayValue": {"values": [{"kvlistValue": {"values": [
            {"key": "type", "value": {"stringValue": "text"}},
            {"key": "content", "value": {"stringValue": "Pool exhausted."}}]}}]}}}]}}]}}
    result = {"kvlistValue": {"values": [
        {"key": "ready", "value": {"boolValue": False}},
        {"key": "restarts", "value": {"intValue": 6}},
        {"key": "load", "value": {"doubleValue": "0.5"}},
        {"key": "raw", "value": {"bytesValue": "AAE="}},
        {"key": "none", "value": {}},
        {"key": "labels", "value": {"arrayValue": {}}}]}}
    run = parse(_trace(
        _tool("call_1", 100, {"key": "gen_ai.tool.call.result", "value": result}),
        _span("chat", 200, [_s("gen_ai.operation.name", "generate_content"),
                            _s("gen_ai.request.model", "gemini-2.5-pro"),
                            {"key": "gen_ai.output.messages", "value": messages}]),
    ))
    assert run == ImportedRun(format="otel", answer="Pool exhausted.", question=None,
                              agent="gemini-2.5-pro", trace_id=TRACE, span_id=f"{200:016x}",
                              calls=(
        ImportedCall("call_1", "get_pods", {}, result={
            "ready": False, "restarts": 6, "load": 0.5, "raw": "AAE=", "none": None,
            "labels": []}),))


def test_otel__the_answer_is_the_last_chat_to_end_with_text_and_the_question_the_first() -> None:
    run = parse(_trace(
        _chat(300, None, [_says("assistant", _text("Second."))],
              _s("gen_ai.response.model", "m-2")),
        _chat(100, [_says("system", _text("Be brief.")), *ASKED, _says("user", _text("Also?"))],
              [_says("assistant", _text("First."))], _s("gen_ai.response.model", "m-1")),
        _chat(400, None, [_says("assistant", {"type": "reasoning", "content": "hm"})]),
        _tool("call_1", 200, _s("gen_ai.tool.call.result", "")),
    ))
    assert (run.question, run.answer, run.agent) == ("Why 500s?", "Second.", "m-2")
    assert run.calls == (ImportedCall("call_1", "get_pods", {}, result=""),)


def test_otel__spans_without_genai_attributes_are_left_out() -> None:
    run = parse(_trace(_span("GET /pods", 10, [_s("http.request.method", "GET")]),
                       _chat(20, ASKED, ANSWERED)))
    assert run == ImportedRun(format="otel", answer="Pool exhausted.", calls=(),
                              question="Why 500s?", agent=None, trace_id=TRACE,
                              span_id=f"{20:016x}")


def test_otel__crlf_lines_and_raw_line_separators_inside_strings_are_read() -> None:
    tool = _tool("call_1", 1, _s("gen_ai.tool.call.result", "a\u2028b"))
    tool["name"] = "execute_tool\u2028get_pods"
    first = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [tool]}]}]},
                       ensure_ascii=False)
    text = first + "\r\n" + _trace(_chat(2, ASKED, ANSWERED)).replace("\n", "\r\n")
    assert "\u2028" in text
    assert parse(text).calls == (ImportedCall("call_1", "get_pods", {}, result="a\u2028b"),)
    tool["attributes"] = tool["attributes"][:2]
    broken = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [tool]}]}]},
                        ensure_ascii=False)
    assert incident.refused(parse, broken) == (f"{AT} ('execute_tool\\u2028get_pods'): "
                                               "gen_ai.tool.call.id missing")


test_otel__a_malformed_fixture_is_refused_on_one_line_naming_the_place = (
    incident.refuses_fixtures(parse, [
        ("otel_not_json.jsonl", "line 2: not JSON (Expecting value at column 119)"),
        ("otel_wrong_shape.jsonl", "line 1: not OTLP trace data (resourceMetrics, not traces)"),
        ("otel_duplicate_id.jsonl",
         "line 1: resourceSpans[0].scopeSpans[0].spans[1] ('execute_tool search_logs'): duplicate "
         "gen_ai.tool.call.id 'call_k8sPods2xQ7vLmN9pR4tW1yZ' (first at line 1: "
         "resourceSpans[0].scopeSpans[0].spans[0] ('execute_tool kubectl_get_pods'))"),
        ("otel_two_traces.jsonl",
         "the file holds 2 traces; import one (trace ids '5b8efff798038103d269b633813fc60c', "
         "'0af7651916cd43dd8448eb211c80319c')"),
        ("otel_bad_id.jsonl",
         "line 1: resourceSpans[0].scopeSpans[0].spans[0] ('execute_tool kubectl_get_pods'): "
         "gen_ai.tool.call.id 'call pods/1' has characters outside [A-Za-z0-9_-]"),
        ("otel_no_answer.jsonl",
         "no final answer: no chat span's gen_ai.output.messages holds assistant text"),
    ]))


AT = "line 1: resourceSpans[0].scopeSpans[0].spans[0]"


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file: no OTLP JSON"),
    ("\n  \n", "empty file: no OTLP JSON"),
    ("{\n", "not JSON (Expecting property name enclosed in double quotes at line 2 column 1)"),
    ("[]\n", "line 1: expected an object, got an array"),
    ('{"resourceSpans": []}\n', "no spans: the file holds no resourceSpans[].scopeSpans[].spans[]"),
    ('{"resourceSpans": {}}\n', "line 1: resourceSpans: expected an array, got an object"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [3]}]}]}\n',
     f"{AT}: expected an object, got a number"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}\n' * 2 + "{" * 70 + "\n",
     "line 3: not JSON (Expecting property name enclosed in double quotes at column 2)"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}\n',
     f"{AT}.traceId: expected a string, got a number"),
])
def test_otel__a_malformed_file_is_refused_on_one_line(text: str, message: str) -> None:
    assert incident.refused(parse, text) == message


@pytest.mark.parametrize(("spans", "message"), [
    ([_tool(None, 1)], f"{AT} ('execute_tool get_pods'): gen_ai.tool.call.id missing"),
    ([_span("t", 1, [_s("gen_ai.operation.name", "execute_tool"),
                     _s("gen_ai.tool.call.id", "call_1")])],
     f"{AT} ('t'): gen_ai.tool.name missing"),
    ([_tool("call_1", 1, _s("gen_ai.tool.call.arguments", "{ns: shop}"))],
     f"{AT} ('execute_tool get_pods'): gen_ai.tool.call.arguments: not JSON (Expecting "
     "property name enclosed in double quotes at line 1 column 2)"),
    ([_tool("call_1", 1, _s("gen_ai.tool.call.arguments", '"shop"'))],
     f"{AT} ('execute_tool get_pods'): gen_ai.tool.call.arguments: expected a JSON object, "
     "got a string"),
    ([_tool("call_1", 1, {"key": "gen_ai.tool.call.arguments",
                          "value": {"arrayValue": {"values": []}}})],
     f"{AT} ('execute_tool get_pods'): gen_ai.tool.call.arguments: expected a JSON object, "
     "got an array"),
    ([_tool("call_1", 1, {"key": "x", "value": {"intValue": "12a"}})],
     f"{AT} ('execute_tool get_pods').attributes[3] ('x').intValue: expected an integer, "
     "got '12a'"),
    ([_tool("call_1", 1, {"key": "x", "value": {"doubleValue": "NaN"}})],
     f"{AT} ('execute_tool get_pods').attributes[3] ('x').doubleValue: expected a finite "
     "number, got 'NaN'"),
    ([_tool("call_1", 1, {"key": "x", "value": {"stringValue": 1}})],
     f"{AT} ('execute_tool get_pods').attributes[3] ('x').stringValue: expected a string, "
     "got a number"),
    ([_tool("call_1", 1, {"key": "x", "value": {"boolValue": "true"}})],
     f"{AT} ('execute_tool get_pods').attributes[3] ('x').boolValue: expected a boolean, "
     "got a string"),
    ([_tool("call_1", 1, {"key": "x", "value": {"mapValue": {}}})],
     f"{AT} ('execute_tool get_pods').attributes[3] ('x'): no AnyValue field "
     "(found ['mapValue'])"),
    ([_tool("call_1", 1, {"value": {"stringValue": "x"}})],
     f"{AT} ('execute_tool get_pods').attributes[3]: key missing"),
    ([_tool("call_1", 1, status={"code": 7})],
     f"{AT} ('execute_tool get_pods').status.code: 7 is not 0, 1, 2 or a STATUS_CODE_ name"),
    ([_tool("call_1", 1, startTimeUnixNano="-5")],
     f"{AT} ('execute_tool get_pods').startTimeUnixNano: is negative (-5)"),
    ([_tool("call_1", 1, endTimeUnixNano=1.5)],
     f"{AT} ('execute_tool get_pods').endTimeUnixNano: expected an integer, got a number"),
    ([_tool("call_1", 1, events=[{"name": "exception", "attributes": {}}])],
     f"{AT} ('execute_tool get_pods').events[0].attributes: expected an array, "
     "got an object"),
    ([_chat(1, "[{", ANSWERED)],
     f"{AT} ('chat'): gen_ai.input.messages: not JSON (Expecting property name enclosed in "
     "double quotes at line 1 column 3)"),
    ([_chat(1, ASKED, [{"parts": []}])],
     f"{AT} ('chat'): gen_ai.output.messages[0]: role missing"),
    ([_chat(1, ASKED, [{"role": "assistant", "parts": {}}])],
     f"{AT} ('chat'): gen_ai.output.messages[0].parts: expected an array, got an object"),
    ([_chat(1, ASKED, [_says("assistant", {"type": "text", "content": ["a"]})])],
     f"{AT} ('chat'): gen_ai.output.messages[0].parts[0]: text part's content is an array, "
     "not a string"),
    ([_chat(1, [_says("tool", {"type": "tool_call_response", "id": "call_1"})], ANSWERED)],
     f"{AT} ('chat'): gen_ai.input.messages[0].parts[0]: tool_call_response part has no "
     "response"),
    ([_chat(1, ASKED, [_says("assistant", _text("Checking the pods."),
                             {"type": "tool_call", "id": "call_1", "name": "get_pods"})])],
     f"no final answer: the last assistant text ({AT} ('chat'): gen_ai.output.messages[0]) "
     "comes with tool calls"),
    ([_chat(1, ASKED, ANSWERED, _s("gen_ai.request.model", "m")),
      _chat(2, ASKED, ANSWERED, {"key": "gen_ai.response.model", "value": {"intValue": "4"}})],
     "line 1: resourceSpans[0].scopeSpans[0].spans[1] ('chat'): gen_ai.response.model is a "
     "number, not a string"),
])
def test_otel__a_malformed_span_is_refused_on_one_line_naming_the_place(
    spans: list[dict[str, Any]], message: str,
) -> None:
    assert incident.refused(parse, _trace(*spans)) == message


def test_otel__any_change_to_the_trace_parses_or_is_a_one_line_transcript_error() -> None:
    lines = [json.loads(line) for line in incident.read(TRANSCRIPT).splitlines()]
    changes = (changed for changed in incident.mutations(lines, "[{}]")
               if isinstance(changed, list))
    texts = ("".join(json.dumps(line) + "\n" for line in changed) for changed in changes)
    counts = incident.outcomes(parse, texts)
    assert counts["parsed"] > 50 and counts["refused"] > 50


def test_otel__every_cut_of_the_trace_parses_or_is_a_one_line_transcript_error() -> None:
    incident.outcomes(parse, incident.cuts(incident.read(TRANSCRIPT), 13))


def test_otel__the_answer_keeps_its_trace_span_and_response_ids() -> None:
    run = parse(_trace(_chat(20, ASKED, ANSWERED, _s("gen_ai.response.id", "chatcmpl-9"))))
    assert (run.trace_id, run.span_id, run.response_id) == (TRACE, f"{20:016x}", "chatcmpl-9")
