"""The HTTP side: a threaded server on 127.0.0.1 speaking the Messages API and the control API.

Messages API: `POST /v1/messages` (any query, e.g. `?beta=true`) and
`POST /v1/messages/count_tokens`. Message Batches API: `/v1/messages/batches...` (`batches`);
a batch's `results_url` is absolute, on the host the client asked for (its `Host` header).

Control API (JSON in, JSON out; a bad specification answers 400 `{"error": ...}`):

| method and path | body | answer |
|---|---|---|
| `POST /_control/script` | `{"role": r, "replies": [reply, ...]}` | `{"queued": n}` |
| `POST /_control/faults` | `{"role": r, "faults": [fault, ...]}` | `{"queued": n}` |
| `POST /_control/latency` | `{"seconds": s}` or `{"seconds": s, "role": r}` | `{}` |
| `POST /_control/responder` | `{"responder": spec, "role"?: r}` | `{}` |
| `POST /_control/load` | a script document (see `FakeState.load`) | `{}` |
| `POST /_control/reset` | none | `{}` |
| `GET /_control/requests[?role=r]` | | `{"requests": [record, ...]}` |
| `GET /_control/pending` | | `{"replies": {role: n}, "faults": {role: [fault]}}` |
| `GET /_control/batches` | | `{"batches": [batch with its "requests", ...]}` |

A responder spec is `package.module:function`, `minimal` or null (none: 500 "no scripted reply").
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_anthropic.actions import Decision, Drop, Hang, Respond
from fake_anthropic.batches import BATCHES_PATH
from fake_anthropic.responders import load_responder
from fake_anthropic.state import FakeState
from fake_anthropic.tokens import JSON

_REASONS = {529: "Overloaded"}


class FakeServer(ThreadingHTTPServer):
    """One thread per connection, a deep accept queue, and a stop that leaves no thread behind."""

    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: FakeState) -> None:
        self.state = state
        self._live: dict[threading.Thread, socket.socket] = {}
        self._live_lock = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host name (getfqdn); a fake on 127.0.0.1 must not.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Registered before it starts, so a stop never misses a connection being born.
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), daemon=True
        )
        with self._live_lock:
            self._live[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, dropped socket) is part of the game, not an error.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def close_connections(self, timeout: float = 5.0) -> None:
        """Wake every handler (kept-alive sockets included) and join its thread."""
        with self._live_lock:
            live = dict(self._live)
        for connection in live.values():
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in live:
            thread.join(timeout)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds 40 ms.
    disable_nagle_algorithm = True
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Quiet: the recorded requests are the log."""

    def _body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status, _REASONS.get(status))
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, body: object) -> None:
        self._send(status, json.dumps(body).encode(), {"content-type": "application/json"})

    def do_GET(self) -> None:  # noqa: N802 - the base's name
        url = urlsplit(self.path)
        state = self.server.state
        if url.path == "/_control/requests":
            role = parse_qs(url.query).get("role", [None])[0]
            self._send_json(200, {"requests": state.requests(role)})
        elif url.path == "/_control/pending":
            self._send_json(200, state.pending())
        elif url.path == "/_control/batches":
            self._send_json(200, {"batches": state.batches.snapshot()})
        elif _is_batches(url.path):
            self._batches("GET", self._body())
        else:
            self._not_found()

    def do_DELETE(self) -> None:  # noqa: N802 - the base's name
        if _is_batches(urlsplit(self.path).path):
            self._batches("DELETE", self._body())
        else:
            self._not_found()

    def do_POST(self) -> None:  # noqa: N802 - the base's name
        path = urlsplit(self.path).path
        raw = self._body()
        if path in ("/v1/messages", "/v1/messages/count_tokens"):
            headers = {name.lower(): value for name, value in self.headers.items()}
            self._messages(path, headers, raw)
        elif _is_batches(path):
            self._batches("POST", raw)
        elif path in _CONTROL:
            self._control(path, raw)
        else:
            self._not_found()

    def _not_found(self) -> None:
        body = {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}}
        self._send_json(404, body)

    def _messages(self, path: str, headers: dict[str, str], raw: bytes) -> None:
        self._act(self.server.state.handle_messages(path, headers, raw))

    def _batches(self, method: str, raw: bytes) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        host = headers.get("host") or "{}:{}".format(*self.server.server_address[:2])
        decision = self.server.state.handle_batch(method, self.path, headers, raw,
                                                  f"http://{host}")
        self._act(decision)

    def _act(self, decision: Decision) -> None:
        state = self.server.state
        if decision.delay > 0 and state.stopping.wait(decision.delay):
            self.close_connection = True
            return
        action = decision.action
        if isinstance(action, Respond):
            self._send(action.status, action.body, action.headers)
        elif isinstance(action, Hang):
            state.stopping.wait(action.seconds)
            self.close_connection = True
        elif isinstance(action, Drop):
            self.close_connection = True

    def _control(self, path: str, raw: bytes) -> None:
        try:
            payload = json.loads(raw) if raw.strip() else {}
            if not isinstance(payload, dict):
                raise ValueError("the control body is a JSON object")
            answer = _CONTROL[path](self.server.state, payload)
        except (ValueError, KeyError, TypeError, ImportError, AttributeError) as exc:
            self._send_json(400, {"error": f"{type(exc).__name__}: {exc}"})
            return
        self._send_json(200, answer)


def _is_batches(path: str) -> bool:
    return path == BATCHES_PATH or path.startswith(BATCHES_PATH + "/")


def _script(state: FakeState, payload: JSON) -> JSON:
    return {"queued": state.script(str(payload["role"]), list(payload["replies"]))}


def _faults(state: FakeState, payload: JSON) -> JSON:
    return {"queued": state.fault(str(payload["role"]), list(payload["faults"]))}


def _latency(state: FakeState, payload: JSON) -> JSON:
    state.set_latency(float(payload["seconds"]), payload.get("role"))
    return {}


def _responder(state: FakeState, payload: JSON) -> JSON:
    state.set_default_responder(load_responder(payload.get("responder")), payload.get("role"))
    return {}


def _load(state: FakeState, payload: JSON) -> JSON:
    state.load(payload)
    return {}


def _reset(state: FakeState, payload: JSON) -> JSON:
    state.reset()
    return {}


_CONTROL: dict[str, Callable[[FakeState, JSON], JSON]] = {
    "/_control/script": _script,
    "/_control/faults": _faults,
    "/_control/latency": _latency,
    "/_control/responder": _responder,
    "/_control/load": _load,
    "/_control/reset": _reset,
}
