"""Logs from Grafana Loki: one LogQL range query for the lines, one instant query for the total.

    loki = Loki("prod", LokiBackend(url="http://loki:3100"))
    fetched = loki.search_logs(LogQuery(start=s, end=e, service="checkout", min_level="ERROR",
                                        terms=("timeout",), limit=2000))

The lines: `GET /loki/api/v1/query_range` with

    {app="checkout", level=~"(?i)(error|err|fatal|critical)"} |~ "(?i)timeout"

(`service_selector` with `{service}` replaced, the level matcher on `level_label`; with
`json_lines`, `... |~ "(?i)timeout" | json | level=~"..."`), `direction=forward`, `start` and
`end` in nanoseconds. Loki's `start` is inclusive and its `end` exclusive, so `end` is the
window's end plus 1 ns. With `json_lines` a term is matched against the whole JSON line.

Loki answers at most `max_entries_per_query` lines per request (its server limit
`max_entries_limit_per_query`, 5000 by default). The connector pages forward as logcli does:
the next request starts at the last line's timestamp, and the lines at that timestamp already
read are dropped (a timestamp can hold several lines); it stops at `limit` lines or when a page
comes back short. Each page is read with a streaming JSON parse and abandoned as soon as
enough lines have been read, so memory holds at most `limit` entries plus one page of
boundary lines, whatever the server sends.

The total: `sum(count_over_time(<same selector and filters> [<window>]))` through
`GET /loki/api/v1/query` at `time=end`. Loki's range is left-open, (end - range, end], so the
range is the window plus 1 ms (LogQL ranges have millisecond resolution): it counts the lines
in [start, end] and, at worst, those of the millisecond before `start`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pydantic import ValidationError

from pipeline.data.records import LEVEL_RANK, LEVELS, LogEntry, LogRecord
from pipeline.data.source import BackendStatus, Fetched, LogQuery
from pipeline.errors import SourceError
from pipeline.sources.config import LokiBackend
from pipeline.sources.http import BackendClient
from pipeline.sources.jsonstream import JsonStream, JsonStreamError

QUERY_RANGE = "/loki/api/v1/query_range"
QUERY = "/loki/api/v1/query"
BUILDINFO = "/loki/api/v1/status/buildinfo"

SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
"""A service name the connector puts into a selector: no quotes, braces or regex syntax."""

_LEVEL_SPELLINGS = {
    "DEBUG": ("debug", "trace"), "INFO": ("info",), "WARN": ("warn", "warning"),
    "ERROR": ("error", "err"), "FATAL": ("fatal", "critical"),
}
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")
_MESSAGE_FIELDS = ("message", "msg")
_TRACE_FIELDS = ("trace_id", "traceID", "traceId")


@dataclass(frozen=True, slots=True)
class _Line:
    ts: int
    labels: dict[str, str]
    line: str

    @property
    def key(self) -> tuple[str, str]:
        return json.dumps(self.labels, sort_keys=True), self.line


def regex_literal(text: str) -> str:
    """`text` as an RE2 pattern that matches it literally."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


def logql_string(text: str) -> str:
    """`text` as a LogQL double-quoted string (Go escapes; JSON's are a subset)."""
    return json.dumps(text, ensure_ascii=False)


def level_regex(min_level: str) -> str:
    """The case-insensitive RE2 alternation of the level names at or above `min_level`."""
    upper = min_level.strip().upper()
    if upper not in LEVEL_RANK:
        raise SourceError(f"unknown log level {min_level!r}")
    names = [s for level in LEVELS[LEVEL_RANK[upper]:] for s in _LEVEL_SPELLINGS[level]]
    return "(?i)(" + "|".join(names) + ")"


def build_logql(config: LokiBackend, query: LogQuery) -> str:
    """The LogQL log query for `query`: selector, line filters, level filter."""
    if query.service is None:
        selector = config.all_selector
    else:
        if not SERVICE_NAME.match(query.service):
            raise SourceError(f"service name {query.service!r} is not a plain name "
                              "(letters, digits, . _ -)")
        selector = config.service_selector.replace("{service}", query.service)
    level = None
    if query.min_level is not None:
        level = f"{config.level_label}=~{logql_string(level_regex(query.min_level))}"
    if level is not None and not config.json_lines:
        selector = selector.rstrip()
        if not selector.endswith("}"):
            raise SourceError(f"stream selector {selector!r} does not end with '}}'")
        inner = selector[:-1].rstrip()
        selector = inner + (", " if not inner.endswith("{") else "") + level + "}"
    parts = [selector]
    parts += [f"|~ {logql_string('(?i)' + regex_literal(t))}" for t in query.terms]
    if config.json_lines:
        parts.append("| json")
        if level is not None:
            parts.append(f"| {level}")
    return " ".join(parts)


def _ns(moment: datetime) -> int:
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _time(ns: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)


class Loki:
    """The Loki backend of one source."""

    def __init__(self, source: str, config: LokiBackend,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._client = BackendClient(source, "loki", config, transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Loki:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        """Matching lines, oldest first, at most `query.limit`, and the total in the window."""
        logql = build_logql(self.config, query)
        start, end = _ns(query.start), _ns(query.end)
        if end < start or query.limit <= 0:
            return Fetched(items=[], total=0 if end < start else None)
        texts: list[str] = []
        entries, size = self._lines(logql, start, end, query, texts)
        total, count_size = self._count(logql, start, end, texts)
        total = max(total, len(entries))
        return Fetched(items=entries, total=total, queries=tuple(texts),
                       fetched_bytes=size + count_size)

    def check(self) -> BackendStatus:
        """Probe `/loki/api/v1/status/buildinfo`: reachable, version, auth."""
        return self._client.probe(BUILDINFO, lambda body: body["version"])

    # -- lines ------------------------------------------------------------------------------

    def _lines(self, logql: str, start: int, end: int, query: LogQuery,
               texts: list[str]) -> tuple[list[LogEntry], int]:
        entries: list[LogEntry] = []
        boundary: set[tuple[str, str]] = set()
        size = 0
        page_start = start
        while len(entries) < query.limit:
            want = min(self.config.max_entries_per_query,
                       query.limit - len(entries) + len(boundary))
            params = {"query": logql, "start": str(page_start), "end": str(end + 1),
                      "limit": str(want), "direction": "forward"}
            texts.append(self._client.query_text(QUERY_RANGE, params))
            page, read = self._page(params, want)
            size += read
            fresh = [line for line in page if not (line.ts == page_start
                                                   and line.key in boundary)]
            for line in fresh[: query.limit - len(entries)]:
                entries.append(self._entry(line, query))
            if len(page) < want or not fresh:
                break  # the window is exhausted (or one timestamp holds more than a page)
            last = page[-1].ts
            keys = {line.key for line in page if line.ts == last}
            boundary = boundary | keys if last == page_start else keys
            page_start = last
        return entries, size

    def _page(self, params: dict[str, str], want: int) -> tuple[list[_Line], int]:
        """One query_range answer's first `want` lines in time order, read as a stream."""
        lines: list[_Line] = []
        with self._client.stream(QUERY_RANGE, params) as response:
            reader = JsonStream(response.iter_bytes(), max_bytes=self.config.max_bytes)
            try:
                for line in _stream_lines(reader):
                    lines.append(line)
                    if len(lines) >= want:
                        break  # stop reading: the server sent at least what was asked
            except JsonStreamError as exc:
                raise self._client.error(_reason(exc)) from None
            read = reader.bytes_read
        lines.sort(key=lambda line: line.ts)
        return lines, read

    def _entry(self, line: _Line, query: LogQuery) -> LogEntry:
        cfg, labels = self.config, line.labels
        fields: dict[str, Any] = {}
        if cfg.json_lines:
            try:
                parsed = json.loads(line.line)
            except ValueError:
                parsed = None
            fields = parsed if isinstance(parsed, dict) else {}
        message = next((str(fields[f]) for f in _MESSAGE_FIELDS if fields.get(f)), line.line)
        level = fields.get(cfg.level_label) or labels.get(cfg.level_label) or "INFO"
        trace = labels.get(cfg.trace_label) or next(
            (str(fields[f]) for f in (cfg.trace_label, *_TRACE_FIELDS) if fields.get(f)), None)
        service = labels.get(cfg.service_label) or query.service or "unknown"
        values = {"ts": _time(line.ts), "service": service, "message": message or "(empty line)",
                  "pod": labels.get(cfg.pod_label), "trace_id": trace, "level": str(level)}
        try:
            record = LogRecord.model_validate(values)
        except ValidationError:
            record = LogRecord.model_validate({**values, "level": "INFO"})  # an unknown level
        return LogEntry.from_record(record)

    # -- total ------------------------------------------------------------------------------

    def _count(self, logql: str, start: int, end: int, texts: list[str]) -> tuple[int, int]:
        range_ms = (end - start) // 1_000_000 + 1
        metric = f"sum(count_over_time({logql} [{range_ms}ms]))"
        params = {"query": metric, "time": str(end)}
        texts.append(self._client.query_text(QUERY, params))
        body, size = self._client.get_json(QUERY, params)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or body.get("status") != "success" \
                or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise self._client.error("answered the count query with no vector")
        try:
            return sum(int(float(s["value"][1])) for s in data["result"]), size
        except (KeyError, IndexError, TypeError, ValueError):
            raise self._client.error("answered the count query with a malformed sample") from None


def _stream_lines(reader: JsonStream) -> Iterator[_Line]:
    """The lines of a query_range body, stream by stream, as they arrive."""
    reader.begin_object()
    while (key := reader.next_key()) is not None:
        if key == "data":
            yield from _data_lines(reader)
        elif key == "status":
            status = reader.value()
            if status != "success":
                raise JsonStreamError(f"answered status {status!r}")
        else:
            reader.value()
    reader.finish()


def _data_lines(reader: JsonStream) -> Iterator[_Line]:
    reader.begin_object()
    while (key := reader.next_key()) is not None:
        if key == "resultType":
            kind = reader.value()
            if kind != "streams":
                raise JsonStreamError(f"answered resultType {kind!r}, not streams")
        elif key == "result":
            reader.begin_array()
            while reader.next_item():
                yield from _stream_values(reader)
        else:
            reader.value()


def _stream_values(reader: JsonStream) -> Iterator[_Line]:
    labels: dict[str, str] | None = None
    pending: list[list[Any]] = []  # values that came before their "stream" key
    reader.begin_object()
    while (key := reader.next_key()) is not None:
        if key == "stream":
            raw = reader.value()
            if not isinstance(raw, dict):
                raise JsonStreamError("a stream's labels are not an object")
            labels = {str(k): str(v) for k, v in raw.items()}
            for value in pending:
                yield _line(value, labels)
            pending = []
        elif key == "values":
            reader.begin_array()
            while reader.next_item():
                value = reader.value()
                if labels is None:
                    pending.append(value)
                else:
                    yield _line(value, labels)
        else:
            reader.value()
    for value in pending:
        yield _line(value, {})


def _line(value: Any, labels: dict[str, str]) -> _Line:
    """One `["<ns>", "<line>"]` value; a third element (Loki 3 with categorized labels)
    holds structured metadata and parsed labels, merged here as Loki merges them by default."""
    if not isinstance(value, list) or len(value) < 2 or not isinstance(value[1], str):
        raise JsonStreamError("a stream value is not [\"<ns>\", \"<line>\"]")
    try:
        ts = int(value[0])
    except (TypeError, ValueError):
        raise JsonStreamError("a stream value's timestamp is not nanoseconds") from None
    if len(value) > 2 and isinstance(value[2], dict):
        extra = {str(k): str(v) for group in value[2].values() if isinstance(group, dict)
                 for k, v in group.items()}
        labels = {**labels, **extra}
    return _Line(ts, labels, value[1])


def _reason(exc: JsonStreamError) -> str:
    text = str(exc)
    return text if text.startswith("answered") else f"answered something that is not its " \
        f"documented format: {text}"


__all__ = ["Loki", "build_logql", "level_regex", "logql_string", "regex_literal"]
