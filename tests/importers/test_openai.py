"""The OpenAI Chat Completions importer: the diagnosis transcript read exactly (ids, order,
results, unanswered calls, question, answer, model), each call a valid invocation, and every
malformed input a one-line TranscriptError that names its place."""

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
from pipeline.importers.openai import parse
from pipeline.importers.record import ImportedCall, ImportedRun

DATA = Path(__file__).parent / "data"

QUESTION = "Why is checkout-service returning 500s since 14:05 UTC?"
PODS = (
    "NAME                               READY   STATUS             RESTARTS      AGE\n"
    "checkout-service-7d9f8b6c5-2xkqp   1/1     Running            4 (3m ago)    2d\n"
    "checkout-service-7d9f8b6c5-8hjwz   1/1     Running            5 (1m ago)    2d\n"
    "checkout-service-7d9f8b6c5-tq4nm   0/1     CrashLoopBackOff   6 (20s ago)   2d"
)
METRICS_TEXT = ('{"service": "checkout-service", "metric": "http_server_5xx_rate", "unit": "1/s", '
                '"start": "2026-11-30T14:00:00Z", "step_seconds": 300, '
                '"values": [0.0, 12.4, 31.8]}')
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
    format="openai",
    answer=ANSWER,
    question=QUESTION,
    agent="gpt-4.1-2025-04-14",
    calls=(
        ImportedCall(call_id="call_k8sPods2xQ7vLmN9pR4tW1yZ", tool="kubectl_get_pods",
                     arguments={"namespace": "shop", "selector": "app=checkout-service"},
                     result=PODS),
        ImportedCall(call_id="call_prom5xxRate8HfK3dQ2sJ6u", tool="query_metrics",
                     arguments={"service": "checkout-service",
                                "query": 'sum(rate(http_requests_total{service="checkout-service"'
                                         ',code=~"5.."}[5m]))',
                                "start": "2026-11-30T13:45:00Z", "end": "2026-11-30T14:30:00Z"},
                     result=METRICS_TEXT),
        ImportedCall(call_id="call_logSearch4Tn7cV1bX9mE2a", tool="search_logs",
                     arguments={"service": "checkout-service",
                                "query": "level:error OR level:warn",
                                "since": "2026-11-30T14:00:00Z", "limit": 3},
                     result=LOGS),
        ImportedCall(call_id="call_rollHist6Gp2wZ8kL5rY3c", tool="get_rollout_history",
                     arguments={"namespace": "shop", "deployment": "checkout-service"},
                     result=ROLLOUT_ERROR, is_error=False),
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
    assert parse(_read("openai_checkout_500s.json")) == EXPECTED


def test_openai__parse_transcript_picks_the_openai_parser() -> None:
    assert parse_transcript(_read("openai_checkout_500s.json"), "openai") == EXPECTED


def test_openai__every_call_is_a_valid_invocation() -> None:
    invocations = [invocation_of(call, max_items=1000, max_bytes=131072)
                   for call in parse(_read("openai_checkout_500s.json")).calls]
    assert [i.tool_call_id for i in invocations] == [c.call_id for c in EXPECTED.calls]
    assert [(i.status, i.evidence_status) for i in invocations] == [
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        (LifecycleStatus.ERROR, EvidenceStatus.ERROR),
    ]
    metrics = invocations[1]
    assert metrics.projection is not None
    assert metrics.projection.model_dump()["result"]["values"] == [0.0, 12.4, 31.8]
    assert invocations[4].error == "the transcript holds no result for this call"


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


@pytest.mark.parametrize(("name", "message"), [
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
])
def test_openai__a_malformed_fixture_is_refused_on_one_line_naming_the_place(
    name: str, message: str,
) -> None:
    assert _refused(_read(name)) == message


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
    ("3", "expected a Chat Completions request body (an object with messages) or an array of "
          "messages, got a number"),
    ("{}", "no messages: expected a Chat Completions request body (an object with messages)"),
    ('{"messages": null}', "messages: expected an array, got null"),
    ("[" * 65 + "]" * 65, "nests deeper than 64 levels"),
])
def test_openai__a_malformed_document_is_refused_on_one_line(text: str, message: str) -> None:
    assert _refused(text) == message


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
    assert _refused(_run(*messages)) == message


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
    others: tuple[Any, ...] = (None, 0, "", "x y", "[1]", [], {}, True)
    yield from (other for other in others if other != value)


def test_openai__any_change_to_the_transcript_parses_or_is_a_one_line_transcript_error() -> None:
    document = json.loads(_read("openai_checkout_500s.json"))
    outcomes = {"parsed": 0, "refused": 0}
    for changed in _mutations(document):
        try:
            parse(json.dumps(changed))
        except TranscriptError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
        else:
            outcomes["parsed"] += 1
    assert outcomes["parsed"] > 50 and outcomes["refused"] > 50


def test_openai__every_cut_of_the_transcript_is_a_one_line_transcript_error() -> None:
    text = _read("openai_checkout_500s.json").rstrip()
    for end in range(0, len(text), 7):
        assert "\n" not in _refused(text[:end])
