"""Replay servers: Loki and the Kubernetes API answering a shipped scenario's data over HTTP,
in the wire formats the real servers use, so the connectors are tested against real HTTP.

Neither server has a Debian package, so these stand in for them. Each interprets only the
subset of its query language the connectors emit, honestly (it parses and evaluates it), and
rejects anything else as the real server would (Loki: HTTP 400 with a text/plain message;
Kubernetes: a `Status` object).

Where the shapes come from:
- Loki `query_range` / `query` bodies (`status`, `data.resultType` `streams` / `vector`,
  `result[].stream` + `values` `[["<ns>", "<line>"]]`, `metric` + `value` `[<s>, "<v>"]`,
  `stats.summary/querier/ingester`): grafana/loki docs/sources/reference/loki-http-api.md
  ("Query logs within a range of time", "Statistics"). `start` inclusive, `end` exclusive:
  same page. `/loki/api/v1/status/buildinfo` fields (`version`, `revision`, `branch`,
  `buildDate`, `buildUser`, `goVersion`): same page, "Show build information".
- Loki errors as `text/plain` bodies: grafana/loki pkg/util/server/error.go (`WriteError`); the
  limit message: pkg/querier/http.go / pkg/util/validation (`max entries limit per query
  exceeded, limit > max_entries_limit_per_query (%d > %d)`).
- Structured metadata merged into a result stream's labels unless the client asks for
  categorized labels: grafana/loki PR #10419. Range vectors are left-open, (t - range, t]:
  pkg/logql/range_vector.go (`load`: "the lower bound of the range is not inclusive").
- Kubernetes lists (`apiVersion`, `kind: EventList|DeploymentList|ReplicaSetList`,
  `metadata.resourceVersion/continue/remainingItemCount`, `limit`/`continue` paging, 410 for an
  expired token) and `Status` errors: kubernetes.io API concepts ("Retrieving large results
  sets in chunks") and the API reference for Event v1, Deployment v1, ReplicaSet v1.
  Event field selectors (`reason`, `type`, `involvedObject.*`, `source`, `metadata.*`):
  kubernetes/kubernetes pkg/apis/core/v1/conversion.go (`AddFieldLabelConversionsForEvent`).
  `/version` (`major`, `minor`, `gitVersion`, ...): k8s.io/apimachinery/pkg/version Info.
  The revision and change-cause annotations (`deployment.kubernetes.io/revision`,
  `kubernetes.io/change-cause`) and owner references of ReplicaSets: the Deployment
  controller (`kubectl rollout history` reads the same).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import json
import multiprocessing
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

Body = bytes | Iterable[bytes]


@dataclass
class Reply:
    status: int
    body: Body
    content_type: str = "application/json"


@dataclass
class Request:
    path: str
    params: dict[str, str]
    headers: dict[str, str]


class ReplayError(Exception):
    """A request the replay rejects: status and body as the real server would send."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


# -- the HTTP server ------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        replay = self.server.replay
        split = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        request = Request(split.path, params, {k.lower(): v for k, v in self.headers.items()})
        replay.requests.append(request)
        try:
            reply = replay.answer(request)
        except ReplayError as exc:
            reply = exc.reply
        try:
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading: expected

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        if isinstance(reply.body, bytes):
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in reply.body:
            if chunk:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, replay: Replay) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replay = replay

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer (timeouts, early stops) is part of the tests


class Replay:
    """A replay server on a free local port; `fault` makes it misbehave:
    "500", "timeout" (answers after `delay_s`), "big" (a body past any small bound),
    "malformed" (broken JSON). With `token`, requests need `Authorization: Bearer <token>`."""

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.fault: str | None = None
        self.delay_s = 2.0
        self.requests: list[Request] = []
        self._server = _HTTPServer(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Replay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, request: Request) -> Reply:
        if self.token is not None and \
                request.headers.get("authorization") != f"Bearer {self.token}":
            return self.unauthorized()
        if self.fault == "500":
            return self.internal_error()
        if self.fault == "timeout":
            time.sleep(self.delay_s)
        if self.fault == "big":
            return Reply(200, _padding(4 * 1024 * 1024))
        if self.fault == "malformed":
            return Reply(200, b'{"status": "success", "data": {"resultType": "streams", '
                              b'"result": [{"stream": {"app": "x"}, "values": [["1", oops')
        return self.route(request)

    def route(self, request: Request) -> Reply:
        raise NotImplementedError

    def unauthorized(self) -> Reply:
        raise NotImplementedError

    def internal_error(self) -> Reply:
        raise NotImplementedError


def _padding(size: int) -> Iterator[bytes]:
    yield b'{"status": "success", "padding": "'
    for _ in range(size // 65536):
        yield b"x" * 65536
    yield b'"}'


def free_port() -> int:
    """A local port nothing listens on (for the unreachable case)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ns(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


# -- LogQL, the subset the connector emits ---------------------------------------------------

class LogQLError(ValueError):
    pass


@dataclass
class LogExpr:
    """`{matchers} stage*`: stream matchers, then line filters, `json` and label filters."""

    matchers: list[tuple[str, str, str]]
    stages: list[tuple[str, str, str]] = field(default_factory=list)

    def evaluate(self, labels: dict[str, str], line: str) -> dict[str, str] | None:
        """The result labels of a matching line, or None when it does not match."""
        if not all(_label_matches(labels.get(n, ""), op, v) for n, op, v in self.matchers):
            return None
        labels = dict(labels)
        for kind, op, value in self.stages:
            if kind == "line":
                found = (value in line) if op in ("|=", "!=") else bool(_regex(value).search(line))
                if found != (op in ("|=", "|~")):
                    return None
            elif kind == "json":
                labels.update(_json_labels(line, labels))
            elif not _label_matches(labels.get(kind, ""), op, value):
                return None
        return labels


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise LogQLError(f"invalid regex {pattern!r}: {exc}") from None


def _label_matches(actual: str, op: str, value: str) -> bool:
    if op in ("=", "!="):
        return (actual == value) == (op == "=")
    return (_regex(value).fullmatch(actual) is not None) == (op == "=~")


def _json_labels(line: str, labels: dict[str, str]) -> dict[str, str]:
    try:
        parsed = json.loads(line)
    except ValueError:
        return {"__error__": "JSONParserErr"}
    if not isinstance(parsed, dict):
        return {"__error__": "JSONParserErr"}
    out = {}
    for key, value in parsed.items():
        if isinstance(value, dict | list) or value is None:
            continue
        name = re.sub(r"[^A-Za-z0-9_]", "_", str(key))
        name = f"{name}_extracted" if name in labels else name  # Loki's rule for collisions
        out[name] = value if isinstance(value, str) else json.dumps(value)
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def fail(self, what: str) -> LogQLError:
        near = self.text[self.pos:self.pos + 12] or "end of input"
        return LogQLError(f"parse error at line 1, col {self.pos + 1}: syntax error: "
                          f"unexpected {near!r}, expected {what}")

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, literal: str) -> bool:
        self.ws()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.take(literal):
            raise self.fail(repr(literal))

    def ident(self) -> str:
        self.ws()
        match = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.text, self.pos)
        if not match:
            raise self.fail("a label name")
        self.pos = match.end()
        return match.group()

    def string(self) -> str:
        self.ws()
        if self.text.startswith("`", self.pos):
            end = self.text.find("`", self.pos + 1)
            if end < 0:
                raise self.fail("a closing backtick")
            value, self.pos = self.text[self.pos + 1:end], end + 1
            return value
        match = re.compile(r'"(?:[^"\\]|\\.)*"').match(self.text, self.pos)
        if not match:
            raise self.fail("a string")
        try:
            value = json.loads(match.group())  # Go's escapes the connector emits are JSON's
        except ValueError:
            raise self.fail("a string with Go escapes this replay knows") from None
        self.pos = match.end()
        return str(value)

    def op(self, ops: tuple[str, ...]) -> str:
        for candidate in ops:
            if self.take(candidate):
                return candidate
        raise self.fail(" or ".join(ops))

    def log_expr(self) -> LogExpr:
        self.expect("{")
        matchers = []
        while True:
            name = self.ident()
            matchers.append((name, self.op(("=~", "!~", "!=", "=")), self.string()))
            if not self.take(","):
                break
        self.expect("}")
        expr = LogExpr(matchers)
        while True:
            self.ws()
            if self.text.startswith(("|~", "|=", "!=", "!~"), self.pos):
                op = self.text[self.pos:self.pos + 2]
                self.pos += 2
                expr.stages.append(("line", op, self.string()))
            elif self.take("|"):
                if self.take("json"):
                    expr.stages.append(("json", "", ""))
                else:
                    name = self.ident()
                    expr.stages.append((name, self.op(("=~", "!~", "!=", "=")), self.string()))
            else:
                return expr

    def end(self) -> None:
        self.ws()
        if self.pos != len(self.text):
            raise self.fail("end of query")


_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?"
                       r"(?:(\d+)ms)?$")
_DURATION_NS = (365 * 86400 * 10**9, 7 * 86400 * 10**9, 86400 * 10**9, 3600 * 10**9,
                60 * 10**9, 10**9, 10**6)


def parse_log_query(text: str) -> LogExpr:
    parser = _Parser(text)
    expr = parser.log_expr()
    parser.end()
    return expr


def parse_count_query(text: str) -> tuple[LogExpr, int]:
    """`sum(count_over_time(<log query> [<duration>]))`: the expression and the range in ns."""
    parser = _Parser(text)
    parser.expect("sum")
    parser.expect("(")
    parser.expect("count_over_time")
    parser.expect("(")
    expr = parser.log_expr()
    parser.expect("[")
    close = text.find("]", parser.pos)
    match = _DURATION.match(text[parser.pos:close].strip()) if close > 0 else None
    if not match or not any(match.groups()):
        raise parser.fail("a duration such as 5m or 300000ms")
    parser.pos = close + 1
    parser.expect(")")
    parser.expect(")")
    parser.end()
    range_ns = sum(int(g) * unit for g, unit in zip(match.groups(), _DURATION_NS, strict=True)
                   if g)
    return expr, range_ns


# -- Loki -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    ts: int
    labels: dict[str, str]  # stream labels plus structured metadata
    line: str


class LokiReplay(Replay):
    """Loki answering a scenario's `logs.jsonl`. Streams are labelled `app` (the service),
    `pod` and, unless `json_lines`, `level` (lower-case); the trace id is structured metadata.
    With `json_lines` the line is `{"level", "message", "trace_id"}` JSON and `level` is not
    a stream label. `max_entries` is the server's `max_entries_limit_per_query`."""

    version = "3.1.1"

    def __init__(self, scenario: str | Path, *, max_entries: int = 5000,
                 json_lines: bool = False, token: str | None = None) -> None:
        super().__init__(token=token)
        self.max_entries = max_entries
        self.json_lines = json_lines
        self.entries = self._load(Path(scenario) / "logs.jsonl")
        self._times = [e.ts for e in self.entries]

    def _load(self, path: Path) -> list[_Entry]:
        seen, entries = set(), []
        for text in path.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            row = json.loads(text)
            labels = {"app": row["service"]}
            if row.get("pod"):
                labels["pod"] = row["pod"]
            if self.json_lines:
                body = {"level": row["level"].lower(), "message": row["message"]}
                if row.get("trace_id"):
                    body["trace_id"] = row["trace_id"]
                line = json.dumps(body)
            else:
                labels["level"] = row["level"].lower()
                line = row["message"]
                if row.get("trace_id"):
                    labels["trace_id"] = row["trace_id"]
            entry = _Entry(_ns(row["ts"]), labels, line)
            key = (entry.ts, json.dumps(labels, sort_keys=True), line)
            if key not in seen:  # Loki drops an exact duplicate (same stream, time, line)
                seen.add(key)
                entries.append(entry)
        entries.sort(key=lambda e: e.ts)
        return entries

    def route(self, request: Request) -> Reply:
        handlers: dict[str, Callable[[Request], Reply]] = {
            "/loki/api/v1/query_range": self._query_range,
            "/loki/api/v1/query": self._query,
            "/loki/api/v1/status/buildinfo": self._buildinfo,
            "/ready": lambda _: Reply(200, b"ready\n", "text/plain; charset=utf-8"),
        }
        handler = handlers.get(request.path)
        if handler is None:
            return Reply(404, b"404 page not found\n", "text/plain; charset=utf-8")
        try:
            return handler(request)
        except LogQLError as exc:
            raise ReplayError(_loki_error(400, str(exc))) from None

    def unauthorized(self) -> Reply:
        return _loki_error(401, "no org id")

    def internal_error(self) -> Reply:
        return _loki_error(500, "rpc error: code = Internal desc = failed to get chunks")

    def _buildinfo(self, _: Request) -> Reply:
        return Reply(200, json.dumps({
            "version": self.version, "revision": "a8c6c4d", "branch": "HEAD",
            "buildUser": "root@replay", "buildDate": "2024-08-01T00:00:00Z",
            "goVersion": "go1.22.5"}).encode())

    def _params(self, request: Request) -> tuple[str, int, int, int, str]:
        params = request.params
        if "query" not in params:
            raise LogQLError("query parameter is required")
        try:
            start, end = int(params["start"]), int(params["end"])
            limit = int(params.get("limit", "100"))
        except (KeyError, ValueError):
            raise LogQLError("start, end and limit must be integers (ns)") from None
        direction = params.get("direction", "backward").lower()
        if direction not in ("forward", "backward"):
            raise LogQLError(f"invalid direction {direction!r}")
        if limit > self.max_entries:
            raise ReplayError(_loki_error(400, "max entries limit per query exceeded, limit > "
                                          f"max_entries_limit_per_query ({limit} > "
                                          f"{self.max_entries})"))
        return params["query"], start, end, limit, direction

    def _query_range(self, request: Request) -> Reply:
        query, start, end, limit, direction = self._params(request)
        expr = parse_log_query(query)
        lo, hi = bisect.bisect_left(self._times, start), bisect.bisect_left(self._times, end)
        window = self.entries[lo:hi] if direction == "forward" else self.entries[lo:hi][::-1]
        picked: list[tuple[dict[str, str], _Entry]] = []
        for entry in window:
            labels = expr.evaluate(entry.labels, entry.line)
            if labels is not None:
                picked.append((labels, entry))
                if len(picked) >= limit:
                    break
        streams: dict[str, tuple[dict[str, str], list[list[str]]]] = {}
        for labels, entry in picked:
            key = json.dumps(labels, sort_keys=True)
            streams.setdefault(key, (labels, []))[1].append([str(entry.ts), entry.line])
        result = [{"stream": labels, "values": values} for labels, values in streams.values()]
        return Reply(200, _streams_body(result, len(picked)))

    def _query(self, request: Request) -> Reply:
        params = request.params
        try:
            at = int(params["time"])
        except (KeyError, ValueError):
            raise LogQLError("time must be an integer (ns)") from None
        expr, range_ns = parse_count_query(params.get("query", ""))
        lo = bisect.bisect_right(self._times, at - range_ns)
        hi = bisect.bisect_right(self._times, at)
        count = sum(1 for e in self.entries[lo:hi] if expr.evaluate(e.labels, e.line) is not None)
        result = [{"metric": {}, "value": [at / 1e9, str(count)]}] if count else []
        return Reply(200, json.dumps({"status": "success", "data": {
            "resultType": "vector", "result": result, "stats": _stats(count)}}).encode())


def _stats(lines: int) -> dict[str, Any]:
    summary = {"bytesProcessedPerSecond": 0, "linesProcessedPerSecond": 0,
               "totalBytesProcessed": 0, "totalLinesProcessed": lines, "execTime": 0.001,
               "queueTime": 0, "totalEntriesReturned": lines}
    return {"summary": summary, "querier": {"store": {"totalChunksRef": 0}},
            "ingester": {"totalReached": 1, "totalLinesSent": lines}}


def _streams_body(result: list[dict[str, Any]], lines: int) -> Iterator[bytes]:
    yield b'{"status":"success","data":{"resultType":"streams","result":['
    for i, stream in enumerate(result):
        yield (b"," if i else b"") + json.dumps(stream).encode()
    yield b'],"stats":' + json.dumps(_stats(lines)).encode() + b"}}"


def _loki_error(status: int, message: str) -> Reply:
    return Reply(status, message.encode(), "text/plain; charset=utf-8")


class LokiFlood(LokiReplay):
    """A Loki whose one stream `{app="flood", level="error"}` holds `lines` lines, 1 ms apart,
    generated as they are sent. It ignores `limit` and streams every matching line (as an
    unbounded proxy would), so any bound on what the client holds is the client's own.
    `lines_sent` counts the lines it wrote before the client hung up."""

    start_ns = 1_790_000_000 * 10**9
    labels = {"app": "flood", "level": "error"}

    def __init__(self, lines: int = 1_000_000, *, token: str | None = None) -> None:
        Replay.__init__(self, token=token)
        self.lines = lines
        self.lines_sent = 0
        self.max_entries = 10**9
        self.json_lines = False
        self.entries, self._times = [], []

    def line(self, i: int) -> tuple[int, str]:
        return self.start_ns + i * 10**6, f"request r-{i:07d} failed: upstream timeout after 3 s"

    def route(self, request: Request) -> Reply:
        if request.path == "/replay/stats":  # the replay's own, for tests in another process
            return Reply(200, json.dumps({"lines_sent": self.lines_sent}).encode())
        return super().route(request)

    def _query_range(self, request: Request) -> Reply:
        query, start, end, _, _ = self._params(request)
        return Reply(200, self._flood(parse_log_query(query), start, end))

    def _query(self, request: Request) -> Reply:
        at = int(request.params["time"])
        expr, range_ns = parse_count_query(request.params.get("query", ""))
        count = 0
        for i in range(self.lines):
            ts, line = self.line(i)
            if at - range_ns < ts <= at and expr.evaluate(self.labels, line) is not None:
                count += 1
        result = [{"metric": {}, "value": [at / 1e9, str(count)]}] if count else []
        return Reply(200, json.dumps({"status": "success", "data": {
            "resultType": "vector", "result": result, "stats": _stats(count)}}).encode())

    def _flood(self, expr: LogExpr, start: int, end: int) -> Iterator[bytes]:
        yield b'{"status":"success","data":{"resultType":"streams","result":[{"stream":' + \
            json.dumps(self.labels).encode() + b',"values":['
        batch: list[str] = []
        sent = 0
        for i in range(self.lines):
            ts, line = self.line(i)
            if start <= ts < end and expr.evaluate(self.labels, line) is not None:
                batch.append(json.dumps([str(ts), line]))
            if len(batch) == 500 or (batch and i == self.lines - 1):
                yield ("," if sent else "").encode() + ",".join(batch).encode()
                sent += len(batch)
                self.lines_sent += len(batch)
                batch = []
        yield b']}],"stats":{}}}'


def _serve_flood(lines: int, conn: Connection) -> None:
    with LokiFlood(lines) as flood:
        conn.send(flood.url)
        conn.recv()  # until the parent says stop


@contextmanager
def flood_process(lines: int = 1_000_000) -> Iterator[str]:
    """A LokiFlood in a process of its own (its work neither traced nor sharing the GIL with
    the client being measured); yields its URL. `GET /replay/stats` tells `lines_sent`."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve_flood, args=(lines, child), daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the flood replay did not start")
        yield str(parent.recv())
    finally:
        parent.send("stop")
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
        parent.close()
        child.close()


# -- Kubernetes -------------------------------------------------------------------------------

_EVENT_FIELDS = {
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
    "metadata.namespace", "metadata.name",
}


def _status(code: int, reason: str, message: str) -> Reply:
    return Reply(code, json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code}).encode())


def _uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _split_selector(text: str) -> list[str]:
    """Split on commas not escaped with a backslash (field selectors) and not in parens."""
    parts, current, depth, i = [], "", 0, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            current += text[i:i + 2]
            i += 2
            continue
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
        i += 1
    return [p for p in [*parts, current] if p.strip()]


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if path == "source" and isinstance(value, dict):
        value = value.get("component")
    return "" if value is None else str(value)


def parse_field_selector(text: str) -> list[tuple[str, str, str]]:
    """`a=b,c!=d` into (field, op, value); fields outside the Event set are rejected."""
    out = []
    for term in _split_selector(text):
        match = re.fullmatch(r"\s*([A-Za-z.]+)\s*(==|!=|=)(.*)", term)
        if not match:
            raise ReplayError(_status(400, "BadRequest", f"invalid selector: '{text}'"))
        name, op, value = match.groups()
        if name not in _EVENT_FIELDS:
            raise ReplayError(_status(400, "BadRequest", f'"{name}" is not a known field '
                                      "selector: only \"metadata.name\", "
                                      "\"metadata.namespace\" and the Event fields"))
        out.append((name, "!=" if op == "!=" else "=", _unescape(value)))
    return out


def parse_label_selector(text: str) -> Callable[[dict[str, str]], bool]:
    """Equality (`=`, `==`, `!=`), set (`in`, `notin`) and existence (`k`, `!k`) terms."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_selector(text):
        term = term.strip()
        key = r"([A-Za-z0-9][-A-Za-z0-9_./]*)"
        if m := re.fullmatch(key + r"\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)", term):
            k, op, v = m.groups()
            tests.append(lambda labels, k=k, v=v, neg=op == "!=": (labels.get(k) == v) != neg)
        elif m := re.fullmatch(key + r"\s+(in|notin)\s+\(([^)]*)\)", term):
            k, op, values = m.groups()
            allowed = {x.strip() for x in values.split(",")}
            tests.append(lambda labels, k=k, a=allowed, neg=op == "notin":
                         (labels.get(k) in a) != neg)
        elif m := re.fullmatch(r"(!?)" + key, term):
            neg, k = m.groups()
            tests.append(lambda labels, k=k, neg=bool(neg): (k in labels) != neg)
        else:
            raise ReplayError(_status(400, "BadRequest",
                                      f"unable to parse requirement: '{term}'"))
    return lambda labels: all(test(labels) for test in tests)


class KubernetesReplay(Replay):
    """The Kubernetes API answering a scenario's `events.json` and `deployments.json`.

    Events are core/v1 Events (every third one written, as the events.k8s.io/v1 API writes
    them, with only `eventTime`). Each service of deployments.json becomes a Deployment
    labelled `app=<service>` and one ReplicaSet per version, oldest first with revisions 1, 2,
    ...: the first record's previous_version is revision 1, created a week before it; images
    `registry.local/<service>:<version>`, `kubernetes.io/change-cause` the record's change,
    `author_annotation` its author. `page_cap` caps items per page below the client's `limit`
    (a server may answer fewer than asked, with a `continue` token)."""

    git_version = "v1.30.4"
    author_annotation = "verity.dev/deployed-by"

    def __init__(self, scenario: str | Path, *, page_cap: int | None = None,
                 token: str | None = None) -> None:
        super().__init__(token=token)
        folder = Path(scenario)
        self.page_cap = page_cap
        self.resource_version = 48213
        self.events = [self._event(i, e) for i, e in enumerate(
            json.loads((folder / "events.json").read_text(encoding="utf-8")))]
        self.deployments, self.replicasets = self._rollouts(
            json.loads((folder / "deployments.json").read_text(encoding="utf-8")))

    def route(self, request: Request) -> Reply:
        path = request.path
        if path == "/version":
            return Reply(200, json.dumps({
                "major": "1", "minor": "30", "gitVersion": self.git_version,
                "gitCommit": "9a6b4f8c0e6d1f5b0c3a7d2e1f4b5c6d7e8f9a0b",
                "gitTreeState": "clean", "buildDate": "2024-08-14T19:00:00Z",
                "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"}).encode())
        patterns = {
            r"/api/v1/namespaces/([^/]+)/events": ("v1", "EventList", self.events),
            r"/apis/apps/v1/namespaces/([^/]+)/deployments":
                ("apps/v1", "DeploymentList", self.deployments),
            r"/apis/apps/v1/namespaces/([^/]+)/replicasets":
                ("apps/v1", "ReplicaSetList", self.replicasets),
        }
        for pattern, (api_version, kind, items) in patterns.items():
            if m := re.fullmatch(pattern, path):
                return self._list(request, m.group(1), api_version, kind, items)
        return _status(404, "NotFound", "the server could not find the requested resource")

    def unauthorized(self) -> Reply:
        return _status(401, "Unauthorized", "Unauthorized")

    def internal_error(self) -> Reply:
        return _status(500, "InternalError",
                       "Internal error occurred: etcdserver: request timed out")

    def _list(self, request: Request, namespace: str, api_version: str, kind: str,
              items: list[dict[str, Any]]) -> Reply:
        params = request.params
        selected = [i for i in items if i["metadata"]["namespace"] == namespace]
        if params.get("fieldSelector"):
            if kind != "EventList":
                raise ReplayError(_status(400, "BadRequest", "field selector not supported"))
            terms = parse_field_selector(params["fieldSelector"])
            selected = [i for i in selected if all(
                (_field_value(i, f) == v) == (op == "=") for f, op, v in terms)]
        if params.get("labelSelector"):
            matches = parse_label_selector(params["labelSelector"])
            selected = [i for i in selected if matches(i["metadata"].get("labels", {}))]
        offset = self._offset(params.get("continue"))
        try:
            limit = int(params["limit"]) if params.get("limit") else len(selected)
        except ValueError:
            raise ReplayError(_status(400, "BadRequest", "invalid limit")) from None
        limit = min(limit, self.page_cap or limit) or len(selected)
        page = selected[offset:offset + limit]
        meta: dict[str, Any] = {"resourceVersion": str(self.resource_version)}
        if offset + limit < len(selected):
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"v": "meta.k8s.io/v1", "rv": self.resource_version,
                 "start": offset + limit}).encode()).decode()
            meta["remainingItemCount"] = len(selected) - offset - limit
        return Reply(200, json.dumps({"kind": kind, "apiVersion": api_version,
                                      "metadata": meta, "items": page}).encode())

    def _offset(self, token: str | None) -> int:
        if not token:
            return 0
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            start = int(decoded["start"])
        except (ValueError, KeyError, TypeError):
            raise ReplayError(_status(400, "BadRequest", "continue key is not valid")) from None
        if decoded.get("rv") != self.resource_version:
            raise ReplayError(_status(410, "Expired", "The provided continue parameter is "
                                      "too old to display a consistent list result."))
        return start

    def _event(self, index: int, record: dict[str, Any]) -> dict[str, Any]:
        ts = record["ts"]
        kind = record["kind"]
        suffix = hashlib.sha1(str(index).encode()).hexdigest()[:16]
        event: dict[str, Any] = {
            "metadata": {"name": f"{record['object']}.{suffix}",
                         "namespace": record["namespace"], "uid": _uid("event", str(index)),
                         "resourceVersion": str(40000 + index), "creationTimestamp": ts},
            "involvedObject": {"kind": kind, "namespace": record["namespace"],
                               "name": record["object"], "uid": _uid(kind, record["object"]),
                               "apiVersion": "v1" if kind == "Pod" else "apps/v1"},
            "reason": record["reason"], "message": record.get("message", ""),
            "source": {"component": "kubelet" if kind == "Pod" else "deployment-controller"},
            "type": record.get("type", "Warning"),
            "reportingComponent": "", "reportingInstance": "",
        }
        count = record.get("count", 1)
        if index % 3 == 2:  # written through events.k8s.io/v1: eventTime, series, no timestamps
            moment = ts.replace("Z", ".000000Z")
            event.update(firstTimestamp=None, lastTimestamp=None, eventTime=moment,
                         action=record["reason"], reportingComponent="kubelet",
                         reportingInstance="node-1")
            if count > 1:
                event["series"] = {"count": count, "lastObservedTime": moment}
        else:
            event.update(firstTimestamp=ts, lastTimestamp=ts, count=count, eventTime=None)
        return event

    def _rollouts(self, records: list[dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        by_service: dict[str, list[dict[str, Any]]] = {}
        for record in sorted(records, key=lambda r: r["deployed_at"]):
            by_service.setdefault(record["service"], []).append(record)
        deployments, replicasets = [], []
        for service, history in by_service.items():
            revisions = []
            first = history[0]
            if first.get("previous_version"):
                week_before = datetime.fromisoformat(first["deployed_at"].replace("Z", "+00:00")
                                                     ) - timedelta(days=7)
                revisions.append({"version": first["previous_version"], "change": "",
                                  "author": None,
                                  "deployed_at": week_before.strftime("%Y-%m-%dT%H:%M:%SZ")})
            revisions += history
            namespace = "shop"
            deployment_uid = _uid("Deployment", namespace, service)
            for number, revision in enumerate(revisions, start=1):
                replicasets.append(self._replicaset(service, namespace, deployment_uid,
                                                    number, revision))
            deployments.append(self._deployment(service, namespace, deployment_uid,
                                                len(revisions), revisions[-1]))
        return deployments, replicasets

    def _template(self, service: str, version: str) -> dict[str, Any]:
        return {"metadata": {"labels": {"app": service}},
                "spec": {"containers": [{"name": service,
                                         "image": f"registry.local/{service}:{version}",
                                         "ports": [{"containerPort": 8080}]}]}}

    def _replicaset(self, service: str, namespace: str, owner_uid: str, number: int,
                    revision: dict[str, Any]) -> dict[str, Any]:
        template_hash = hashlib.sha1(f"{service}:{revision['version']}".encode()
                                     ).hexdigest()[:9]
        annotations = {REVISION_ANNOTATION: str(number),
                       "deployment.kubernetes.io/desired-replicas": "3",
                       "deployment.kubernetes.io/max-replicas": "4"}
        if revision.get("change"):
            annotations["kubernetes.io/change-cause"] = revision["change"]
        if revision.get("author"):
            annotations[self.author_annotation] = revision["author"]
        template = self._template(service, revision["version"])
        template["metadata"]["labels"]["pod-template-hash"] = template_hash
        return {
            "metadata": {
                "name": f"{service}-{template_hash}", "namespace": namespace,
                "uid": _uid("ReplicaSet", service, str(number)),
                "resourceVersion": str(30000 + number),
                "creationTimestamp": revision["deployed_at"],
                "labels": {"app": service, "pod-template-hash": template_hash},
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": service, "uid": owner_uid, "controller": True,
                                     "blockOwnerDeletion": True}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {
                "app": service, "pod-template-hash": template_hash}}, "template": template},
            "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                       "observedGeneration": 1},
        }

    def _deployment(self, service: str, namespace: str, uid: str, revisions: int,
                    newest: dict[str, Any]) -> dict[str, Any]:
        failed = newest.get("status") == "failed"
        progressing = {"type": "Progressing", "status": "False" if failed else "True",
                       "reason": "ProgressDeadlineExceeded" if failed
                       else "NewReplicaSetAvailable",
                       "lastUpdateTime": newest["deployed_at"],
                       "lastTransitionTime": newest["deployed_at"]}
        available = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                     "lastUpdateTime": newest["deployed_at"],
                     "lastTransitionTime": newest["deployed_at"]}
        annotations = {REVISION_ANNOTATION: str(revisions)}
        if newest.get("change"):
            annotations["kubernetes.io/change-cause"] = newest["change"]
        return {
            "metadata": {"name": service, "namespace": namespace, "uid": uid,
                         "resourceVersion": str(20000 + revisions), "generation": revisions,
                         "creationTimestamp": "2026-01-05T09:00:00Z",
                         "labels": {"app": service}, "annotations": annotations},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": service}},
                     "template": self._template(service, newest["version"]),
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                         "maxUnavailable": "25%", "maxSurge": "25%"}},
                     "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600},
            "status": {"observedGeneration": revisions, "replicas": 3, "updatedReplicas": 3,
                       "readyReplicas": 3, "availableReplicas": 3,
                       "conditions": [available, progressing]},
        }


REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
