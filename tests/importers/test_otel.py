"""The OTLP JSON (OpenTelemetry GenAI) importer: the diagnosis trace read exactly (ids, start
order, results from attributes and from tool_call_response parts, span errors, unanswered calls,
question, answer, model), each call a valid invocation, and every malformed input a one-line
TranscriptError that names its place."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models.invocation import EvidenceStatus, LifecycleStatus
from pipeline.errors import TranscriptError
from pipeline.importers.evidence import invocation_of
from pipeline.importers.formats import parse_transcript
from pipeline.importers.otel import parse
from pipeline.importers.record import ImportedCall, ImportedRun

DATA = Path(__file__).parent / "data"
TRACE = "5b8efff798038103d269b633813fc60c"

QUESTION = "Why is checkout-service returning 500s since 14:05 UTC?"
PODS = (
    "NAME                               READY   STATUS             RESTARTS      AGE\n"
    "checkout-service-7d9f8b6c5-2xkqp   1/1     Running            4 (3m ago)    2d\n"
    "checkout-service-7d9f8b6c5-8hjwz   1/1     Running            5 (1m ago)    2d\n"
    "checkout-service-7d9f8b6c5-tq4nm   0/1     CrashLoopBackOff   6 (20s ago)   2d"
)
METRICS = {"service": "checkout-service", "metric": "http_server_5xx_rate", "unit": "1/s",
           "start": "2026-11-30T14:00:00Z", "step_seconds": 300, "values": [0.0, 12.4, 31.8]}
LOGS = (
    "2026-11-30T14:05:12Z ERROR checkout-service POST /api/checkout 500 payment authorization "
    "failed: pool exhausted (payments-db, 20/20 connections in use)\n"
    "2026-11-30T14:05:13Z ERROR checkout-service POST /api/checkout 500 payment authorization "
    "failed: pool exhausted (payments-db, 20/20 connections in use)\n"
    "2026-11-30T14:06:40Z WARN  checkout-service hikari pool payments-db: connection is not "
    "available, request timed out after 30000ms"
)
ROLLOUT_ERROR = (
    'Error from server (Forbidden): replicasets.apps is forbidden: User '
    '"system:serviceaccount:sre:diagnosis-agent" cannot list resource "replicasets" in API '
    'group "apps" in the namespace "shop"'
)
ANSWER = (
    "checkout-service returns 500s because its payments-db connection pool is exhausted. Since "
    "14:05 UTC the logs show \"pool exhausted (payments-db, 20/20 connections in use)\" on POST "
    "/api/checkout, the 5xx rate rose from 0 to 31.8/s by 14:10, and one pod is in "
    "CrashLoopBackOff while the others restart.\n\n"
    "The rollout history could not be read (forbidden) and the trace search returned nothing, "
    "so a recent deploy is not ruled out."
)
EXPECTED = ImportedRun(
    format="otel",
    answer=ANSWER,
    question=QUESTION,
    agent="gpt-4.1-2025-04-14",
    trace_id=TRACE,
    span_id="e1e2e3e4e5e6e7e8",
    calls=(
        ImportedCall(call_id="call_k8sPods2xQ7vLmN9pR4tW1yZ", tool="kubectl_get_pods",
                     arguments={"namespace": "shop", "selector": "app=checkout-service"},
                     result=PODS),
        ImportedCall(call_id="call_prom5xxRate8HfK3dQ2sJ6u", tool="query_metrics",
                     arguments={"service": "checkout-service",
                                "query": 'sum(rate(http_requests_total{service="checkout-service"'
                                         ',code=~"5.."}[5m]))',
                                "start": "2026-11-30T13:45:00Z", "end": "2026-11-30T14:30:00Z"},
                     result=METRICS),
        ImportedCall(call_id="call_logSearch4Tn7cV1bX9mE2a", tool="search_logs",
                     arguments={"service": "checkout-service",
                                "query": "level:error OR level:warn",
                                "since": "2026-11-30T14:00:00Z", "limit": 3},
                     result=LOGS),
        ImportedCall(call_id="call_rollHist6Gp2wZ8kL5rY3c", tool="get_rollout_history",
                     arguments={"namespace": "shop", "deployment": "checkout-service"},
                     result=ROLLOUT_ERROR, is_error=True),
        ImportedCall(call_id="call_traceQry9Mb4hS7fD1jU6e", tool="get_traces",
                     arguments={"service": "checkout-service", "status": "error", "limit": 5},
                     result=None, answered=False),
    ),
)


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _refused(text: str) -> str:
    with pytest.raises(TranscriptError) as caught:
        parse(text)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message
    return message


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
    assert parse(_read("otel_checkout_500s.jsonl")) == EXPECTED


def test_otel__parse_transcript_picks_the_otel_parser() -> None:
    assert parse_transcript(_read("otel_checkout_500s.jsonl"), "otel") == EXPECTED


def test_otel__one_pretty_printed_object_is_read_as_the_lines_are() -> None:
    lines = [json.loads(line) for line in _read("otel_checkout_500s.jsonl").splitlines()]
    merged = {"resourceSpans": [rs for line in lines for rs in line["resourceSpans"]]}
    assert parse(json.dumps(merged, indent=2)) == EXPECTED


def test_otel__every_call_is_a_valid_invocation() -> None:
    invocations = [invocation_of(call, max_items=1000, max_bytes=131072)
                   for call in parse(_read("otel_checkout_500s.jsonl")).calls]
    assert [i.tool_call_id for i in invocations] == [c.call_id for c in EXPECTED.calls]
    assert [(i.status, i.evidence_status) for i in invocations] == [
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.ERROR, EvidenceStatus.ERROR),
        (LifecycleStatus.ERROR, EvidenceStatus.ERROR),
    ]
    metrics = invocations[1]
    assert metrics.projection is not None
    assert metrics.projection.model_dump()["result"]["step_seconds"] == 300
    assert invocations[3].error is not None
    assert invocations[3].error.startswith("Error from server (Forbidden)")


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
    assert _refused(broken) == (f"{AT} ('execute_tool\\u2028get_pods'): "
                                "gen_ai.tool.call.id missing")


@pytest.mark.parametrize(("name", "message"), [
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
])
def test_otel__a_malformed_fixture_is_refused_on_one_line_naming_the_place(
    name: str, message: str,
) -> None:
    assert _refused(_read(name)) == message


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
    assert _refused(text) == message


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
    assert _refused(_trace(*spans)) == message


def _mutations(value: Any) -> Iterator[Any]:
    """`value` with one part changed: every value replaced by others of each JSON type, every
    key removed."""
    if isinstance(value, dict):
        for key, item in value.items():
            for changed in _mutations(item):
                yield {**value, key: changed}
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for changed in _mutations(item):
                yield [*value[:index], changed, *value[index + 1:]]
    others: tuple[Any, ...] = (None, 0, "", "x y", "[{}]", [], {}, True)
    yield from (other for other in others if other != value)


def test_otel__any_change_to_the_trace_parses_or_is_a_one_line_transcript_error() -> None:
    lines = [json.loads(line) for line in _read("otel_checkout_500s.jsonl").splitlines()]
    outcomes = {"parsed": 0, "refused": 0}
    for changed in _mutations(lines):
        if not isinstance(changed, list):
            continue
        try:
            parse("".join(json.dumps(line) + "\n" for line in changed))
        except TranscriptError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
        else:
            outcomes["parsed"] += 1
    assert outcomes["parsed"] > 50 and outcomes["refused"] > 50


def test_otel__every_cut_of_the_trace_parses_or_is_a_one_line_transcript_error() -> None:
    text = _read("otel_checkout_500s.jsonl")
    for end in range(0, len(text), 13):
        try:
            parse(text[:end])
        except TranscriptError as exc:
            assert "\n" not in str(exc)


def test_otel__the_answer_keeps_its_trace_span_and_response_ids() -> None:
    run = parse(_trace(_chat(20, ASKED, ANSWERED, _s("gen_ai.response.id", "chatcmpl-9"))))
    assert (run.trace_id, run.span_id, run.response_id) == (TRACE, f"{20:016x}", "chatcmpl-9")
