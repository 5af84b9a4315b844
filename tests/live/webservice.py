"""The live test service: a small checkout web service of the project's own, with incidents on
demand, exported through `prometheus_client` the way services are instrumented in the wild.

    python -m tests.live.webservice --port 8123
    curl -X POST localhost:8123/control/pool-leak     # or latency, recover

It serves `GET /checkout` (a request takes a connection from a pool of `POOL_MAX`, does
`BASE_LATENCY_S` of work and gives it back) and `GET /metrics`:

    http_requests_total{code,handler,method}        counter: one per answered request
    http_request_duration_seconds{handler}          histogram of the request time
    db_pool_in_use, db_pool_max                     gauges: connections taken, pool size

Incidents (`POST /control/<name>`): `pool-leak` makes every request keep its connection, so
the pool fills to `POOL_MAX`, after which each request waits `POOL_TIMEOUT_S` for a
connection and answers 500 (latency up tenfold, every request failing); `latency` makes the
work take `SLOW_LATENCY_S` while every request still succeeds; `recover` gives the leaked
connections back and restores the normal speed. Two load threads call `/checkout` all the
time, so the counters move as on a service with traffic. `GET /control` answers the state.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

POOL_MAX = 20
BASE_LATENCY_S = 0.05
SLOW_LATENCY_S = 0.5
POOL_TIMEOUT_S = 0.45
LOAD_THREADS = 2
BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5)


class Checkout:
    """The service's state: its pool, its current incident, its metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("http_requests", "Requests answered.",
                                ["code", "handler", "method"], registry=self.registry)
        self.duration = Histogram("http_request_duration_seconds", "Request time.",
                                  ["handler"], buckets=BUCKETS, registry=self.registry)
        self.in_use = Gauge("db_pool_in_use", "Pool connections taken.", registry=self.registry)
        self.pool_max = Gauge("db_pool_max", "Pool size.", registry=self.registry)
        self.pool_max.set(POOL_MAX)
        self.lock = threading.Lock()
        self.taken = 0
        self.leaked = 0
        self.leaking = False
        self.slow = False

    def handle(self) -> int:
        """One checkout request: its HTTP status."""
        started = time.monotonic()
        code = 200
        if self._take():
            time.sleep(SLOW_LATENCY_S if self.slow else BASE_LATENCY_S)
            self._give_back()
        else:
            time.sleep(POOL_TIMEOUT_S)
            code = 500
        self.duration.labels("/checkout").observe(time.monotonic() - started)
        self.requests.labels(str(code), "/checkout", "GET").inc()
        return code

    def incident(self, name: str) -> bool:
        """Start (or end, `recover`) an incident; False for an unknown name."""
        with self.lock:
            if name == "pool-leak":
                self.leaking = True
            elif name == "latency":
                self.slow = True
            elif name == "recover":
                self.leaking = self.slow = False
                self.taken -= self.leaked
                self.leaked = 0
                self.in_use.set(self.taken)
            else:
                return False
        return True

    def state(self) -> dict[str, object]:
        with self.lock:
            return {"taken": self.taken, "leaked": self.leaked, "leaking": self.leaking,
                    "slow": self.slow, "pool_max": POOL_MAX}

    def _take(self) -> bool:
        with self.lock:
            if self.taken >= POOL_MAX:
                return False
            self.taken += 1
            self.in_use.set(self.taken)
            return True

    def _give_back(self) -> None:
        with self.lock:
            if self.leaking:
                self.leaked += 1  # the connection is never returned
                return
            self.taken -= 1
            self.in_use.set(self.taken)


def make_handler(service: Checkout) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/metrics":
                self._send(200, generate_latest(service.registry), CONTENT_TYPE_LATEST)
            elif self.path == "/checkout":
                code = service.handle()
                self._send(code, b"ok\n" if code == 200 else b"no connection\n")
            elif self.path == "/control":
                self._send(200, json.dumps(service.state()).encode())
            else:
                self._send(404, b"not found\n")

        def do_POST(self) -> None:  # noqa: N802
            name = self.path.removeprefix("/control/")
            if self.path.startswith("/control/") and service.incident(name):
                self._send(200, json.dumps(service.state()).encode())
            else:
                self._send(404, b"no such incident\n")

        def _send(self, code: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


def load(url: str, stop: threading.Event) -> None:
    """Call `url` until `stop` is set: the service's traffic."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                answer.read()
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)


def serve(port: int) -> None:
    """Serve on 127.0.0.1:`port` with the load threads running, until killed."""
    service = Checkout()
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(service))
    server.daemon_threads = True
    stop = threading.Event()
    for _ in range(LOAD_THREADS):
        threading.Thread(target=load, args=(f"http://127.0.0.1:{port}/checkout", stop),
                         daemon=True).start()
    try:
        server.serve_forever()
    finally:
        stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    serve(parser.parse_args().port)


if __name__ == "__main__":
    main()
