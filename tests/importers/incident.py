"""What the importer tests share: the diagnosis incident every good fixture records ("Why is
checkout-service returning 500s since 14:05 UTC?", see data/README.md), the calls each importer
must read from it, and the checks every importer is put through the same way (a malformed input
refused on one line, any change to a fixture parsed or refused on one line, every cut of one
refused)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from pipeline.errors import TranscriptError
from pipeline.importers.evidence import invocation_of
from pipeline.importers.record import Format, ImportedCall, ImportedRun

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
METRICS: dict[str, Any] = json.loads(METRICS_TEXT)
"""The 5xx rate as a structured result (OTLP holds it so; the chat formats as METRICS_TEXT)."""
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

CALL_IDS = ("call_k8sPods2xQ7vLmN9pR4tW1yZ", "call_prom5xxRate8HfK3dQ2sJ6u",
            "call_logSearch4Tn7cV1bX9mE2a", "call_rollHist6Gp2wZ8kL5rY3c",
            "call_traceQry9Mb4hS7fD1jU6e")
"""The ids of the five calls in the Chat Completions and the OTLP fixtures (both OpenAI's)."""

FOUND = (LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND)
"""(status, evidence status) of an invocation whose call returned evidence."""
FAILED = (LifecycleStatus.ERROR, EvidenceStatus.ERROR)
"""(status, evidence status) of an invocation whose call failed or was never answered."""


def expected_run(format: Format, *, agent: str, ids: tuple[str, str, str, str, str],
                 metrics: Any, rollout_is_error: bool, trace_id: str | None = None,
                 span_id: str | None = None) -> ImportedRun:
    """The run an importer must read from its diagnosis fixture: the incident's question and
    answer, the model that wrote it (`agent`), the calls (`expected_calls`), and the trace and
    span of the answer where the format has them."""
    calls = expected_calls(ids, metrics=metrics, rollout_is_error=rollout_is_error)
    return ImportedRun(format=format, answer=ANSWER, question=QUESTION, agent=agent,
                       calls=calls, trace_id=trace_id, span_id=span_id)


def expected_calls(ids: tuple[str, str, str, str, str], *, metrics: Any,
                   rollout_is_error: bool) -> tuple[ImportedCall, ...]:
    """The five calls of the diagnosis, in order, with the ids a format gives them: the pods,
    the 5xx rate (`metrics`, text or structured), the logs, the forbidden rollout history
    (flagged as an error where the format can say so) and the trace search nobody answered."""
    pods, rate, logs, rollout, traces = ids
    return (
        ImportedCall(call_id=pods, tool="kubectl_get_pods",
                     arguments={"namespace": "shop", "selector": "app=checkout-service"},
                     result=PODS),
        ImportedCall(call_id=rate, tool="query_metrics",
                     arguments={"service": "checkout-service",
                                "query": 'sum(rate(http_requests_total{service="checkout-service"'
                                         ',code=~"5.."}[5m]))',
                                "start": "2026-11-30T13:45:00Z", "end": "2026-11-30T14:30:00Z"},
                     result=metrics),
        ImportedCall(call_id=logs, tool="search_logs",
                     arguments={"service": "checkout-service",
                                "query": "level:error OR level:warn",
                                "since": "2026-11-30T14:00:00Z", "limit": 3},
                     result=LOGS),
        ImportedCall(call_id=rollout, tool="get_rollout_history",
                     arguments={"namespace": "shop", "deployment": "checkout-service"},
                     result=ROLLOUT_ERROR, is_error=rollout_is_error),
        ImportedCall(call_id=traces, tool="get_traces",
                     arguments={"service": "checkout-service", "status": "error", "limit": 5},
                     result=None, answered=False),
    )


def lines(text: str, *numbers: int) -> str:
    """The lines `numbers` (from 0) of `text`, each ending in a newline, as a file holds them."""
    kept = text.splitlines()
    return "".join(kept[number] + "\n" for number in numbers)


def read(name: str) -> str:
    """The text of the fixture `name` in data/."""
    return (DATA / name).read_text(encoding="utf-8")


def refused(parse: Callable[..., object], *args: Any) -> str:
    """The message of the TranscriptError `parse(*args)` must raise, checked to be one line."""
    with pytest.raises(TranscriptError) as caught:
        parse(*args)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message
    return message


def refuses_fixtures(parse: Callable[[str], object],
                     cases: list[tuple[str, str]]) -> Callable[[str, str], None]:
    """A test, parametrized over `cases` (a malformed fixture's name, the message expected),
    that `parse` refuses each fixture with that message, on one line. Assign it to a name
    starting with `test_` in the test module."""

    @pytest.mark.parametrize(("name", "message"), cases)
    def test(name: str, message: str) -> None:
        assert refused(parse, read(name)) == message

    return test


def invocations(parse: Callable[[str], ImportedRun], fixture: str, expected: ImportedRun,
                statuses: list[tuple[LifecycleStatus, EvidenceStatus]]) -> list[ToolInvocation]:
    """The invocation of each call `parse` reads from `fixture` (`invocation_of` refuses an
    invalid one), checked to keep the ids of `expected`'s calls and to have `statuses`
    ((status, evidence status) each: FOUND or FAILED)."""
    made = [invocation_of(call, max_items=1000, max_bytes=131072)
            for call in parse(read(fixture)).calls]
    assert [i.tool_call_id for i in made] == [c.call_id for c in expected.calls]
    assert [(i.status, i.evidence_status) for i in made] == statuses
    return made


def mutations(value: Any, *extra: str) -> Iterator[Any]:
    """`value` with one part changed: every value replaced by others of each JSON type (and by
    the `extra` strings), every key removed."""
    if isinstance(value, dict):
        for key, item in value.items():
            for changed in mutations(item, *extra):
                yield {**value, key: changed}
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for changed in mutations(item, *extra):
                yield [*value[:index], changed, *value[index + 1:]]
    others: tuple[Any, ...] = (None, 0, "", "x y", *extra, [], {}, True)
    yield from (other for other in others if other != value)


def outcomes(parse: Callable[[str], object], texts: Iterable[str]) -> dict[str, int]:
    """How many of `texts` parse and how many are refused; each refusal checked to be a
    one-line TranscriptError."""
    counts = {"parsed": 0, "refused": 0}
    for text in texts:
        try:
            parse(text)
        except TranscriptError as exc:
            assert "\n" not in str(exc)
            counts["refused"] += 1
        else:
            counts["parsed"] += 1
    return counts


def cuts(text: str, step: int) -> Iterator[str]:
    """`text` cut short every `step` characters, from the empty text on."""
    return (text[:end] for end in range(0, len(text), step))
