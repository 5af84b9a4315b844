"""The plain files importer and the format table: an answer and evidence files read exactly
(one call per file, ids made from the names, JSON parsed, text kept), each call a valid
invocation, and every bad input a one-line TranscriptError that names the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.invocation import EvidenceStatus, LifecycleStatus
from pipeline.errors import TranscriptError
from pipeline.importers.evidence import invocation_of
from pipeline.importers.files import base_name, parse_files
from pipeline.importers.formats import PARSERS, parse_transcript
from pipeline.importers.record import FORMATS, ImportedCall, ImportedRun
from tests.importers import incident

FILES = Path(__file__).parent / "data" / "files"

ANSWER = (
    "checkout-service returns 500s because its payments-db connection pool is exhausted. Since "
    "14:05\nUTC the logs show \"pool exhausted (payments-db, 20/20 connections in use)\" on POST"
    "\n/api/checkout, the 5xx rate rose from 0 to 31.8/s by 14:10, and one pod is in "
    "CrashLoopBackOff.\n"
)
PODS = incident.lines(incident.PODS, 0, 1, 3)
"""pods.txt: the header and two of the incident's pods."""
LOG = incident.lines(incident.LOGS, 0, 2)
"""checkout-service.log: the first and the last of the incident's log lines."""


def _file(name: str) -> tuple[str, str]:
    return str(FILES / name), (FILES / name).read_text(encoding="utf-8")


def test_files__the_answer_and_evidence_files_are_read_exactly() -> None:
    run = parse_files(_file("answer.md"), [_file("pods.txt"), _file("error-rate.json"),
                                           _file("checkout-service.log")])
    assert run == ImportedRun(format="files", answer=ANSWER, question=None, agent=None, calls=(
        ImportedCall(call_id="pods-txt", tool="pods.txt", arguments={"file": "pods.txt"},
                     result=PODS),
        ImportedCall(call_id="error-rate-json", tool="error-rate.json",
                     arguments={"file": "error-rate.json"},
                     result=incident.METRICS),
        ImportedCall(call_id="checkout-service-log", tool="checkout-service.log",
                     arguments={"file": "checkout-service.log"}, result=LOG),
    ))


def test_files__every_call_is_a_valid_invocation() -> None:
    run = parse_files(_file("answer.md"), [_file("pods.txt"), _file("error-rate.json"),
                                           _file("checkout-service.log"), ("empty.txt", "\n")])
    invocations = [invocation_of(call, max_items=1000, max_bytes=131072) for call in run.calls]
    assert [(i.tool_call_id, i.status, i.evidence_status) for i in invocations] == [
        ("pods-txt", LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        ("error-rate-json", LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        ("checkout-service-log", LifecycleStatus.READY, EvidenceStatus.EVIDENCE_FOUND),
        ("empty-txt", LifecycleStatus.READY, EvidenceStatus.NO_EVIDENCE),
    ]
    assert invocations[0].projection is not None
    assert invocations[0].projection.model_dump()["lines"][2].endswith("CrashLoopBackOff   6 "
                                                                       "(20s ago)   2d")


@pytest.mark.parametrize(("text", "status", "service"), [
    # the query ran and matched nothing: its scope, window and zero counts describe it
    ('{"scope": {"service": "payment-db", "window": {"start": "2026-11-30T13:00:00Z", '
     '"end": "2026-11-30T15:00:00Z"}}, "alerts": [], "firing": 0}',
     EvidenceStatus.NO_EVIDENCE, "payment-db"),
    # a total with no sample lines is something found
    ('{"scope": {"service": "search-api"}, "hits": [], "total": 845}',
     EvidenceStatus.EVIDENCE_FOUND, "search-api"),
    # an object holding lists is a result of its own
    ('{"alerts": [], "groups": {"firing": [{"name": "HighErrors"}]}}',
     EvidenceStatus.EVIDENCE_FOUND, None),
])
def test_files__an_empty_result_found_nothing_in_the_scope_it_names(
        text: str, status: EvidenceStatus, service: str | None) -> None:
    (call,) = parse_files(("answer.md", "No alerts."), [("alerts.json", text)]).calls
    invocation = invocation_of(call, max_items=1000, max_bytes=131072)
    assert invocation.evidence_status is status
    assert invocation.projection is not None
    assert invocation.projection.scope.service == service


def test_files__ids_are_made_from_base_names_and_kept_unique() -> None:
    long_name = "x" * 140 + ".log"
    run = parse_files(("answer.txt", "Pool exhausted."), [
        ("logs/app.log", "a"), ("other/app.log", "b"), ("app-log", "c"), ("app.log", "d"),
        ("C:\\evidence\\pod status (1).txt", "e"), (long_name, "f"), (long_name, "g"),
        ("dir/Ünïcode.JSON", '{"ok": true}'),
    ])
    assert [(call.call_id, call.tool) for call in run.calls] == [
        ("app-log", "app.log"), ("app-log-2", "app.log"), ("app-log-3", "app-log"),
        ("app-log-4", "app.log"), ("pod-status--1--txt", "pod status (1).txt"),
        ("x" * 128, long_name), ("x" * 126 + "-2", long_name), ("-n-code-JSON", "Ünïcode.JSON"),
    ]
    assert run.calls[-1].result == {"ok": True}
    assert run.calls[0].arguments == {"file": "app.log"}
    for call in run.calls:
        invocation_of(call, max_items=1000, max_bytes=131072)


def test_files__the_answer_is_kept_as_written_and_no_evidence_is_a_run_without_calls() -> None:
    # claim spans are offsets into the file the user gave: not one character moves
    assert parse_files(("answer.md", "\n  Pool exhausted.\n"), []) == ImportedRun(
        format="files", answer="\n  Pool exhausted.\n", calls=())


@pytest.mark.parametrize(("answer", "evidence", "message"), [
    (("out/answer.md", " \n\t"), [], "answer answer.md: empty"),
    (("answer.md", "ok"), [("pods.json", '{"items": [}')],
     "evidence pods.json: not JSON (Expecting value at line 1 column 12)"),
    (("answer.md", "ok"), [("a/b/pods.json", "")],
     "evidence pods.json: not JSON (Expecting value at line 1 column 1)"),
    (("answer.md", "ok"), [("deep.json", "[" * 65 + "]" * 65)],
     "evidence deep.json: nests deeper than 64 levels"),
    (("answer.md", "ok"), [("pods\n.json", "{")],
     "evidence 'pods\\n.json': not JSON (Expecting property name enclosed in double quotes at "
     "line 1 column 2)"),
    (("answer.md", "ok"), [("logs/", "x")], "evidence 'logs/': no file name"),
    (("answer.md", "ok"), [("", "x")], "evidence '': no file name"),
])
def test_files__bad_input_is_refused_on_one_line_naming_the_file(
    answer: tuple[str, str], evidence: list[tuple[str, str]], message: str,
) -> None:
    assert incident.refused(parse_files, answer, evidence) == message


def test_files__base_name_drops_folders_of_either_slash() -> None:
    assert [base_name(name) for name in ("a/b/c.txt", "a\\b\\c.txt", "c.txt", "a/b/")] == [
        "c.txt", "c.txt", "c.txt", ""]


def test_formats__every_transcript_format_has_a_parser() -> None:
    assert set(PARSERS) == set(FORMATS) - {"files"}


@pytest.mark.parametrize("format", ["files", "langchain", "", "x" * 100])
def test_formats__an_unknown_format_is_refused_listing_the_known_ones(format: str) -> None:
    with pytest.raises(TranscriptError) as caught:
        parse_transcript("{}", format)
    assert str(caught.value) == (f"unknown transcript format {format[:40]!r} "
                                 "(known: anthropic, openai, otel)")


def test_files__a_lone_low_surrogate_escape_is_refused() -> None:
    with pytest.raises(TranscriptError, match="lone surrogate"):
        parse_files(("answer.md", "ok"), [("pods.json", '{"name": "\\udc00"}')])
