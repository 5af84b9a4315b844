"""A local HTTP server answering faults: the first path segment of a request names one."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_TOKEN_ENV = "VERITY_TEST_SOURCE_TOKEN"
FAULT_TOKEN = "s3cr3t-T0KEN-never-in-messages"
SLEEP_S = 1.0


class FaultHandler(BaseHTTPRequestHandler):
    """The first path segment names the fault: /401/..., /500/..., /sleep/..., /big/...,
    /malformed/..., /shape/...; anything else answers 404."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        mode = self.path.split("/")[1]
        if mode == "401":
            self._send(401, b'{"status":"error","error":"unauthorized"}')
        elif mode == "500":
            # An error page that echoes the credential: the client must scrub it.
            echo = self.headers.get("Authorization", "")
            self._send(500, json.dumps({"status": "error", "errorType": "internal",
                                        "error": f"boom, you sent {echo}"}).encode())
        elif mode == "sleep":
            time.sleep(SLEEP_S)
            self._send(200, b'{"status":"success","data":{}}')
        elif mode == "big":
            self._send(200, b'{"status":"success","data":"' + b"x" * 8192 + b'"}')
        elif mode == "malformed":
            self._send(200, b'{"status":"success","data":{"resultType":"matrix","result":[')
        elif mode == "shape":
            self._send(200, b'{"status":"success","data":{"resultType":"vector","result":7},'
                            b'"versionInfo":3}')
        else:
            self._send(404, b"not found")

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class FaultServer(ThreadingHTTPServer):
    """A threaded server of `FaultHandler` that keeps quiet about clients that hung up."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, FaultHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass
