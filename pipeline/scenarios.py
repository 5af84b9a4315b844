"""Sample incidents: loading a scenario folder (format in `scenarios/README.md`) into a source.

A loaded `Scenario` is the data behind `pipeline.sources.scenario.ScenarioSource`, the source
the built-in tools query for a scenario. Loading validates every file; a problem raises
`InputError` with one line naming the file and line. Loaded scenarios are cached by folder and
by the modification times and sizes of its files.
"""

from __future__ import annotations

import csv
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.common import Intent, Verdict
from pipeline.data.records import (
    Alert,
    Deployment,
    KubeEvent,
    LogEntry,
    LogRecord,
    MetricRow,
    MetricSeries,
    Runbook,
    Timestamp,
)
from pipeline.data.runbooks import RunbookIndex
from pipeline.errors import InputError
from pipeline.package_data import SCENARIOS_PACKAGE, package_folder

SCENARIO_FILE = "scenario.json"
DATA_FILES = ("logs.jsonl", "metrics.csv", "alerts.json", "deployments.json", "events.json")
RUNBOOK_DIR = "runbooks"
METRIC_COLUMNS = ("ts", "service", "metric", "value", "unit")

RecordT = TypeVar("RecordT", bound=BaseModel)


class _Meta(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RootCause(_Meta):
    """The known root cause, as a test judges it."""

    summary: str = Field(min_length=1, description="The root cause in words.")
    must_mention: list[str] = Field(
        min_length=1, description="Strings a correct root-cause claim must all contain."
    )


class RedHerring(_Meta):
    """Something that looks related but is not the cause."""

    summary: str = Field(min_length=1, description="What it is.")
    must_not_blame: list[str] = Field(
        min_length=1, description="Strings no root-cause or contributing-factor claim may contain."
    )


class Expected(_Meta):
    """The outcome a correct investigation reaches."""

    status: Literal["SUCCESS", "FALLBACK"] = Field(description="Released outcome.")
    verdicts: list[Verdict] = Field(
        default_factory=list, description="Allowed effective verdicts (DIAGNOSIS)."
    )
    cited_documents: list[str] = Field(
        default_factory=list, description="KNOWLEDGE_QUERY: doc ids the answer must cite."
    )


class ScenarioMeta(_Meta):
    """`scenario.json`."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Short name.")
    title: str = Field(min_length=1, description="One-line title.")
    question: str = Field(min_length=1, description="The user's question.")
    service: str | None = Field(default=None, description="Service the question is about.")
    now: Timestamp = Field(description="When the question is asked.")
    intent: Intent = Field(description="DIAGNOSIS or KNOWLEDGE_QUERY.")
    root_cause: RootCause | None = Field(default=None, description="Known root cause, if any.")
    red_herrings: list[RedHerring] = Field(default_factory=list, description="Not the cause.")
    expected: Expected = Field(description="Expected outcome.")


class ScenarioInfo(_Meta):
    """A scenario as `list_scenarios` shows it."""

    name: str = Field(description="Scenario name (from scenario.json, else the folder).")
    path: str = Field(description="Folder.")
    title: str | None = Field(default=None, description="Title.")
    question: str | None = Field(default=None, description="The question.")
    service: str | None = Field(default=None, description="Service in focus.")
    intent: Intent | None = Field(default=None, description="Intent.")
    error: str | None = Field(default=None, description="Why scenario.json is unusable.")


@dataclass(eq=False)
class Scenario:
    """A loaded scenario: its metadata and its data, indexed for the tools."""

    path: Path
    meta: ScenarioMeta
    logs: list[LogEntry] = field(default_factory=list)
    series: list[MetricSeries] = field(default_factory=list)
    alert_list: list[Alert] = field(default_factory=list)
    deployment_list: list[Deployment] = field(default_factory=list)
    event_list: list[KubeEvent] = field(default_factory=list)
    runbooks: list[Runbook] = field(default_factory=list)
    _logs_by_service: dict[str, list[LogEntry]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.logs.sort(key=lambda e: e.at)
        for entry in self.logs:
            self._logs_by_service.setdefault(entry.service, []).append(entry)
        self.deployment_list.sort(key=lambda d: d.deployed_at)
        self.event_list.sort(key=lambda e: e.ts)

    @property
    def name(self) -> str:
        """The scenario's name."""
        return self.meta.name

    @property
    def now(self) -> datetime:
        """When the question is asked."""
        return self.meta.now

    @cached_property
    def services(self) -> list[str]:
        """Every service named in the data, sorted."""
        names = {e.service for e in self.logs} | {s.service for s in self.series}
        names |= {a.service for a in self.alert_list} | {d.service for d in self.deployment_list}
        if self.meta.service:
            names.add(self.meta.service)
        return sorted(names)

    def log_entries(self, service: str | None = None) -> Sequence[LogEntry]:
        """Log lines of one service (or all), by time."""
        return self.logs if service is None else self._logs_by_service.get(service, [])

    @cached_property
    def _runbook_index(self) -> RunbookIndex:
        return RunbookIndex(self.runbooks)

    def runbook_index(self) -> RunbookIndex:
        """The BM25 index over the runbooks, built once."""
        return self._runbook_index


def default_scenarios_dir() -> Path:
    """The shipped scenarios: the `verity_scenarios` package's folder (the repository's
    `scenarios/` in a checkout, site-packages in an installed wheel)."""
    return package_folder(SCENARIOS_PACKAGE)


_CACHE: dict[Path, tuple[tuple[Any, ...], Scenario]] = {}
_CACHE_LOCK = threading.Lock()


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate a scenario folder (cached until one of its files changes)."""
    folder = Path(path).resolve()
    if not (folder / SCENARIO_FILE).is_file():
        raise InputError(f"{folder}: not a scenario folder (no {SCENARIO_FILE})")
    signature = _signature(folder)
    with _CACHE_LOCK:
        cached = _CACHE.get(folder)
    if cached is not None and cached[0] == signature:
        return cached[1]
    scenario = _load(folder)
    with _CACHE_LOCK:
        _CACHE[folder] = (signature, scenario)
    return scenario


def scenario_path(name: str, root: str | Path | None = None) -> Path:
    """The folder of the scenario called `name` under `root` (default the bundled ones)."""
    base = Path(root) if root is not None else default_scenarios_dir()
    for info in list_scenarios(base):
        if info.name == name or Path(info.path).name == name:
            return Path(info.path)
    known = ", ".join(i.name for i in list_scenarios(base)) or "none"
    raise InputError(f"unknown scenario {name!r} (known: {known})")


def list_scenarios(root: str | Path | None = None) -> list[ScenarioInfo]:
    """Every folder under `root` with a scenario.json, by name; unusable ones carry `error`."""
    base = Path(root) if root is not None else default_scenarios_dir()
    infos = []
    for folder in sorted(p for p in base.iterdir() if (p / SCENARIO_FILE).is_file()):
        try:
            meta = _read_meta(folder)
        except InputError as exc:
            infos.append(ScenarioInfo(name=folder.name, path=str(folder), error=str(exc)))
            continue
        infos.append(ScenarioInfo(
            name=meta.name, path=str(folder), title=meta.title, question=meta.question,
            service=meta.service, intent=meta.intent,
        ))
    return sorted(infos, key=lambda i: i.name)


def _signature(folder: Path) -> tuple[Any, ...]:
    files = [folder / SCENARIO_FILE, *(folder / n for n in DATA_FILES)]
    runbook_dir = folder / RUNBOOK_DIR
    if runbook_dir.is_dir():
        files += sorted(runbook_dir.glob("*.md"))
    stats = []
    for file in files:
        try:
            stat = file.stat()
        except FileNotFoundError:
            continue
        stats.append((file.name, stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


def _load(folder: Path) -> Scenario:
    meta = _read_meta(folder)
    logs = [LogEntry.from_record(r) for r in _read_jsonl(folder / "logs.jsonl", LogRecord)]
    return Scenario(
        path=folder,
        meta=meta,
        logs=logs,
        series=_read_metrics(folder / "metrics.csv"),
        alert_list=_read_json_list(folder / "alerts.json", Alert),
        deployment_list=_read_json_list(folder / "deployments.json", Deployment),
        event_list=_read_json_list(folder / "events.json", KubeEvent),
        runbooks=read_runbooks(folder / RUNBOOK_DIR),
    )


def _problem(file: Path, line: int | None, message: str) -> InputError:
    where = f"{file}:{line}" if line else str(file)
    return InputError(f"{where}: {' '.join(message.split())}")


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where + ': ' if where else ''}{first['msg']}{more}"


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _problem(file, None, f"cannot read: {exc}") from None


def _read_meta(folder: Path) -> ScenarioMeta:
    file = folder / SCENARIO_FILE
    text = _read_text(file)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _problem(file, exc.lineno, f"not JSON: {exc.msg}") from None
    try:
        return ScenarioMeta.model_validate(data)
    except ValidationError as exc:
        key = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        raise _problem(file, _line_of_key(text, key), _first_error(exc)) from None


def _line_of_key(text: str, key: str) -> int | None:
    offset = text.find(f'"{key}"') if key else -1
    return text.count("\n", 0, offset) + 1 if offset >= 0 else None


def _read_jsonl(file: Path, model: type[RecordT]) -> list[RecordT]:
    if not file.exists():
        return []
    records = []
    for number, line in enumerate(_read_text(file).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(model.model_validate_json(line))
        except ValidationError as exc:
            raise _problem(file, number, _jsonl_error(exc)) from None
    return records


def _jsonl_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return f"not JSON: {first['msg']}"
    return _first_error(exc)


def _read_json_list(file: Path, model: type[RecordT]) -> list[RecordT]:
    if not file.exists():
        return []
    text = _read_text(file)
    records = []
    for line, item in _json_array_items(file, text):
        try:
            records.append(model.model_validate(item))
        except ValidationError as exc:
            raise _problem(file, line, _first_error(exc)) from None
    return records


def _json_array_items(file: Path, text: str) -> Iterator[tuple[int, Any]]:
    """Each element of a top-level JSON array with the line it starts on."""
    decoder = json.JSONDecoder()

    def skip(pos: int, chars: str = " \t\r\n") -> int:
        while pos < len(text) and text[pos] in chars:
            pos += 1
        return pos

    def fail(pos: int, message: str) -> InputError:
        return _problem(file, text.count("\n", 0, pos) + 1, message)

    pos = skip(0)
    if not text.startswith("[", pos):
        raise fail(pos, "expected a JSON array")
    pos = skip(pos + 1)
    if text.startswith("]", pos):
        return
    while True:
        try:
            item, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _problem(file, exc.lineno, f"not JSON: {exc.msg}") from None
        yield text.count("\n", 0, pos) + 1, item
        pos = skip(end)
        if text.startswith(",", pos):
            pos = skip(pos + 1)
        elif text.startswith("]", pos):
            if skip(pos + 1) != len(text):
                raise fail(pos + 1, "extra data after the array")
            return
        else:
            raise fail(pos, "expected ',' or ']'")


def _read_metrics(file: Path) -> list[MetricSeries]:
    if not file.exists():
        return []
    series: dict[tuple[str, str], MetricSeries] = {}
    with file.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in METRIC_COLUMNS[:4] if c not in (reader.fieldnames or [])]
        if missing:
            raise _problem(file, 1, f"missing columns: {', '.join(missing)}")
        for row in reader:
            _add_point(series, file, reader.line_num, row)
    for one in series.values():
        order = sorted(range(len(one.times)), key=one.times.__getitem__)
        one.times = [one.times[i] for i in order]
        one.values = [one.values[i] for i in order]
    return sorted(series.values(), key=lambda s: (s.service, s.metric))


def _add_point(
    series: dict[tuple[str, str], MetricSeries], file: Path, line: int, row: dict[str, Any]
) -> None:
    if None in row:
        raise _problem(file, line, "too many columns")
    try:
        point = MetricRow.model_validate({k: v for k, v in row.items() if v is not None})
    except ValidationError as exc:
        raise _problem(file, line, _first_error(exc)) from None
    key = (point.service, point.metric)
    one = series.get(key)
    if one is None:
        one = series[key] = MetricSeries(point.service, point.metric, point.unit)
    elif one.unit != point.unit:
        raise _problem(file, line, f"unit {point.unit!r} differs from {one.unit!r} earlier in "
                       f"{point.service}/{point.metric}")
    one.times.append(point.ts)
    one.values.append(point.value)


def read_runbooks(folder: Path) -> list[Runbook]:
    """The `*.md` runbooks of a folder (front matter: doc_id, title), by file name; none when
    the folder does not exist. InputError for a malformed file or a duplicate doc_id."""
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.md"))
    runbooks = [_read_runbook(file) for file in files]
    seen: dict[str, Path] = {}
    for runbook, file in zip(runbooks, files, strict=True):
        if runbook.doc_id in seen:
            raise _problem(file, 2, f"duplicate doc_id {runbook.doc_id!r} "
                           f"(also in {seen[runbook.doc_id].name})")
        seen[runbook.doc_id] = file
    return runbooks


def _read_runbook(file: Path) -> Runbook:
    lines = _read_text(file).splitlines()
    if not lines or lines[0].strip() != "---":
        raise _problem(file, 1, "expected front matter starting with '---'")
    fields: dict[str, Any] = {}
    for number, line in enumerate(lines[1:], start=2):
        if line.strip() == "---":
            body = "\n".join(lines[number:]).strip()
            break
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise _problem(file, number, "front matter lines are 'key: value'")
        fields[key.strip()] = _front_value(value.strip())
    else:
        raise _problem(file, len(lines), "front matter is not closed with '---'")
    try:
        return Runbook.model_validate({**fields, "text": body})
    except ValidationError as exc:
        key = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        line_no = next((i for i, t in enumerate(lines, 1) if t.startswith(f"{key}:")), 1)
        raise _problem(file, line_no, _first_error(exc)) from None


def _front_value(value: str) -> Any:
    if value.startswith("[") and value.endswith("]"):
        return tuple(v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip())
    return value.strip("'\"")


def clear_cache() -> None:
    """Forget every loaded scenario."""
    with _CACHE_LOCK:
        _CACHE.clear()

