"""A local notification receiver for tests: an HTTP server in a thread that answers POSTs from
a script (status, headers, a pause), keeps every request, and counts deliveries the way a
receiver should: once per Idempotency-Key, checking the webhook signature with its own code
written from the documented scheme (README, "Answers reach the team")."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a status, headers, and a pause before answering."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pause_s: float = 0.0


@dataclass
class Seen:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


def signature_ok(secret: bytes, headers: dict[str, str], body: bytes, *,
                 max_age_s: float = 300) -> bool:
    """The receiver's check, from the documented scheme: v1= hex HMAC-SHA256 of
    `<X-Verity-Timestamp>.<raw body>`, timestamp within `max_age_s` of now."""
    timestamp = headers.get("x-verity-timestamp", "")
    expected = "v1=" + hmac.new(secret, timestamp.encode() + b"." + body,
                                hashlib.sha256).hexdigest()
    fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= max_age_s
    return fresh and hmac.compare_digest(expected, headers.get("x-verity-signature", ""))


class Receiver:
    """The server's state: the script, every request, the keys delivered."""

    def __init__(self, script: list[Reply] | None = None) -> None:
        self.script = list(script or [])
        self.requests: list[Seen] = []
        self.delivered: dict[str, Seen] = {}
        self.lock = threading.Lock()
        self.arrived = threading.Event()

    def answer(self, seen: Seen) -> Reply:
        """Record the request and pick its scripted reply (200 when the script is spent); a
        2xx counts the delivery once per Idempotency-Key."""
        with self.lock:
            self.requests.append(seen)
            reply = self.script.pop(0) if self.script else Reply()
            key = seen.headers.get("idempotency-key", "")
            if 200 <= reply.status < 300 and key not in self.delivered:
                self.delivered[key] = seen
        self.arrived.set()
        return reply


@contextmanager
def serve(receiver: Receiver, port: int = 0) -> Iterator[str]:
    """Run `receiver` on 127.0.0.1:`port` (0: a free one); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply = receiver.answer(Seen(self.path, headers, body))
            time.sleep(reply.pause_s)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def free_port() -> int:
    """A port nothing listens on now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
