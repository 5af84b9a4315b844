"""Loading scenario folders: bundled ones, broken ones (one line naming file and line), cache."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from models.common import Intent
from pipeline.errors import InputError
from pipeline.scenarios import (
    clear_cache,
    default_scenarios_dir,
    list_scenarios,
    load_scenario,
    scenario_path,
)

BUNDLED = {
    "billing-no-evidence", "catalog-pricing-rate-limit", "checkout-injected-instructions",
    "checkout-pool-exhaustion",
    "inventory-oom-crashloop",
    "knowledge-payment-db-credentials", "orders-latency-payment-gateway",
    "search-unexplained-errors", "settlement-tls-expiry",
}
MINIMAL = {
    "name": "tiny", "title": "A tiny scenario", "question": "Why is x-service down?",
    "service": "x-service", "now": "2026-01-01T12:00:00Z", "intent": "DIAGNOSIS",
    "root_cause": None, "red_herrings": [], "expected": {"status": "SUCCESS",
                                                         "verdicts": ["PASS"]},
}


def test_scenarios__default_dir_is_the_repository_folder() -> None:
    assert default_scenarios_dir() == Path(__file__).resolve().parents[2] / "scenarios"


def test_scenarios__all_bundled_scenarios_are_listed_without_errors() -> None:
    infos = list_scenarios()
    assert {i.name for i in infos} == BUNDLED
    assert all(i.error is None and i.question and i.title for i in infos)
    assert [i.name for i in infos] == sorted(i.name for i in infos)


@pytest.mark.parametrize("name", sorted(BUNDLED - {"knowledge-payment-db-credentials"}))
def test_scenarios__diagnosis_scenarios_have_realistic_volumes(name: str) -> None:
    scenario = load_scenario(scenario_path(name))
    assert scenario.meta.intent is Intent.DIAGNOSIS
    assert len(scenario.logs) >= 3000
    assert {e.level for e in scenario.logs} >= {"INFO", "WARN", "ERROR"}
    assert len({e.service for e in scenario.logs}) >= 3
    assert len(scenario.series) >= 4
    for series in scenario.series:
        assert series.times[-1] - series.times[0] >= timedelta(hours=5)
        assert len(series.times) >= 300
    assert scenario.runbooks and scenario.deployment_list
    assert scenario.now == scenario.meta.now


def test_scenarios__knowledge_scenario_has_runbooks_only() -> None:
    scenario = load_scenario(scenario_path("knowledge-payment-db-credentials"))
    assert scenario.meta.intent is Intent.KNOWLEDGE_QUERY
    assert not scenario.logs and len(scenario.runbooks) >= 8
    assert scenario.meta.expected.cited_documents == ["rb-payment-db-credential-rotation"]


def test_scenarios__unknown_name_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown scenario 'nope'"):
        scenario_path("nope")


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.json").write_text(json.dumps(MINIMAL, indent=2))
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_scenarios__only_scenario_json_is_required(tmp_path: Path) -> None:
    scenario = load_scenario(_write(tmp_path / "tiny", {}))
    assert scenario.name == "tiny" and not scenario.logs and not scenario.series
    assert scenario.runbook_index().search("anything") == []


def test_scenarios__naive_times_are_utc_and_lines_are_sorted(tmp_path: Path) -> None:
    lines = [
        {"ts": "2026-01-01T11:00:05", "service": "x-service", "level": "warning", "message": "b"},
        {"ts": "2026-01-01T12:00:01+01:00", "service": "x-service", "level": "ERROR",
         "message": "a"},
    ]
    scenario = load_scenario(_write(tmp_path / "tiny", {
        "logs.jsonl": "\n".join(json.dumps(line) for line in lines) + "\n\n"}))
    assert [e.message for e in scenario.logs] == ["a", "b"]
    assert scenario.logs[0].at == datetime(2026, 1, 1, 11, 0, 1, tzinfo=UTC)
    assert scenario.logs[1].level == "WARN"


BROKEN = [
    pytest.param("logs.jsonl", '{"ts": "2026-01-01T11:00:00Z", "service": "s", "level": "INFO", '
                 '"message": "ok"}\n{"ts": "2026-01-01T11:00:00Z", "service": "s", "level": '
                 '"LOUD", "message": "x"}\n', "logs.jsonl:2: level: Input should be", id="level"),
    pytest.param("logs.jsonl", '{"ts": "yesterday", "service": "s", "level": "INFO", '
                 '"message": "x"}\n', "logs.jsonl:1: ts: Input should be a valid datetime",
                 id="timestamp"),
    pytest.param("logs.jsonl", "\n\n{not json\n", "logs.jsonl:3: not JSON", id="jsonl-syntax"),
    pytest.param("logs.jsonl", '{"ts": "2026-01-01T11:00:00Z", "service": "s", "level": "INFO",'
                 ' "message": "x", "extra": 1}\n', "logs.jsonl:1: extra: Extra inputs",
                 id="unknown-field"),
    pytest.param("metrics.csv", "ts,service,metric,value,unit\n2026-01-01T11:00:00Z,s,m,1,%\n"
                 "2026-01-01T11:01:00Z,s,m,high,%\n", "metrics.csv:3: value: Input should be "
                 "a valid number", id="metric-value"),
    pytest.param("metrics.csv", "ts,service,value\n", "metrics.csv:1: missing columns: metric",
                 id="metric-columns"),
    pytest.param("metrics.csv", "ts,service,metric,value,unit\n2026-01-01T11:00:00Z,s,m,1,%\n"
                 "2026-01-01T11:01:00Z,s,m,2,ms\n", "metrics.csv:3: unit 'ms' differs",
                 id="metric-unit"),
    pytest.param("alerts.json", '[\n  {"name": "A", "service": "s", "state": "firing",\n'
                 '   "starts_at": "2026-01-01T11:00:00Z"},\n  {"name": "B", "service": "s",\n'
                 '   "state": "maybe", "starts_at": "2026-01-01T11:00:00Z"}\n]\n',
                 "alerts.json:4: state: Input should be 'firing' or 'resolved'", id="alert"),
    pytest.param("deployments.json", '{"service": "s"}', "deployments.json:1: expected a JSON "
                 "array", id="not-an-array"),
    pytest.param("events.json", '[\n {"ts": "2026-01-01T11:00:00Z"},\n', "events.json:2: ",
                 id="events-truncated"),
    pytest.param("runbooks/a.md", "no front matter\n", "a.md:1: expected front matter",
                 id="runbook-front-matter"),
    pytest.param("runbooks/a.md", "---\ndoc_id: a\n---\ntext\n", "a.md:1: title: Field "
                 "required", id="runbook-title"),
    pytest.param("runbooks/a.md", "---\ndoc_id: bad id!\ntitle: T\n---\n",
                 "a.md:2: doc_id: String should match pattern", id="runbook-doc-id"),
]


@pytest.mark.parametrize(("name", "text", "message"), BROKEN)
def test_scenarios__a_broken_file_is_one_line_naming_file_and_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    folder = _write(tmp_path / "broken", {name: text})
    with pytest.raises(InputError) as info:
        load_scenario(folder)
    assert message in str(info.value)
    assert str(folder) in str(info.value)
    assert "\n" not in str(info.value)


def test_scenarios__duplicate_runbook_ids_are_refused(tmp_path: Path) -> None:
    page = "---\ndoc_id: same\ntitle: T\n---\nbody\n"
    folder = _write(tmp_path / "dup", {"runbooks/a.md": page, "runbooks/b.md": page})
    with pytest.raises(InputError, match=r"b\.md:2: duplicate doc_id 'same' \(also in a\.md\)"):
        load_scenario(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"intent": "GUESS"}, "scenario.json:7: intent: Input should be",
                     id="intent"),
        pytest.param({"question": None}, "scenario.json:4: question: Input should be a valid "
                     "string", id="question"),
        pytest.param({"root_cause": {"summary": "x", "must_mention": []}},
                     "scenario.json:8: root_cause.must_mention: List should have at least 1",
                     id="must-mention"),
    ],
)
def test_scenarios__a_broken_scenario_json_names_its_line(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "scenario.json").write_text(json.dumps({**MINIMAL, **change}, indent=2))
    with pytest.raises(InputError) as info:
        load_scenario(folder)
    assert message in str(info.value)
    [listed] = list_scenarios(tmp_path)
    assert listed.error is not None and message in listed.error


def test_scenarios__not_a_scenario_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a scenario folder"):
        load_scenario(tmp_path)


def test_scenarios__loads_are_cached_until_a_file_changes(tmp_path: Path) -> None:
    folder = tmp_path / "cached"
    shutil.copytree(scenario_path("billing-no-evidence"), folder)
    first = load_scenario(folder)
    assert load_scenario(folder) is first
    logs = folder / "logs.jsonl"
    stat = logs.stat()
    os.utime(logs, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = load_scenario(folder)
    assert second is not first and len(second.logs) == len(first.logs)
    clear_cache()
    assert load_scenario(folder) is not second
