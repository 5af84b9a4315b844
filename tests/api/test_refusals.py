"""What uvicorn refuses itself, before the app sees the request, against `verity serve
--embedded` on a free port, over raw sockets: a NUL in a header, an 80 KB URL and a 1 MB
header are each the API's one-line JSON error with the security headers, and the connection
is closed; the 1 MB header is refused once its first kilobytes are in, without waiting for the
rest."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.api.conftest import ROOT

pytestmark = pytest.mark.slow
URL = re.compile(rb"Verity on http://127\.0\.0\.1:(\d+)/#token=(vrt_[A-Za-z0-9_-]+)")
HEAD_LIMIT = 16 * 1024
"""VERITY_API_MAX_HEAD_BYTES's default."""
SECURITY_HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY",
                    "referrer-policy": "no-referrer"}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of `verity serve --embedded`, serving for the module."""
    from tests.conftest import cli_env

    home = tmp_path_factory.mktemp("refusals")
    log = home / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--embedded", "--port", "0"], cwd=ROOT,
            env=cli_env(home / "home", VERITY_PROVIDER="offline"), stdout=out,
            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (found := URL.search(log.read_bytes())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield int(found.group(1))
    finally:
        server.terminate()
        server.wait(15)
    assert b"Traceback" not in log.read_bytes(), log.read_text()[-3000:]


def _exchange(port: int, *parts: bytes, wait_s: float = 5.0) -> tuple[int, dict[str, str],
                                                                      bytes, bool]:
    """Send `parts`, then read the answer until the server closes: its status, headers, body,
    and whether the server closed the connection within `wait_s`."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as conn:
        for part in parts:
            conn.sendall(part)
        received = b""
        closed = False
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {name.lower(): value.strip()
               for name, _, value in (line.partition(":") for line in lines[1:])}
    return status, headers, body, closed


def _assert_refused(answer: tuple[int, dict[str, str], bytes, bool], status: int,
                    error: str) -> None:
    got, headers, body, closed = answer
    assert got == status, (got, body)
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": error}
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, name
    assert "default-src 'none'" in headers.get("content-security-policy", "")
    assert closed, "the connection stays open"


def test_a_well_formed_request_is_answered(port: int) -> None:
    status, headers, body, _ = _exchange(
        port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and json.loads(body) == {"status": "ok", "checks": {}}
    assert headers.get("x-content-type-options") == "nosniff"


@pytest.mark.parametrize("request_bytes", [
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\x00b\r\n\r\n", id="nul-header"),
    pytest.param(b"GET /healthz HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", id="bad-header"),
    pytest.param(b"GET /he lthz HTTP/1.1\r\nHost: x\r\n\r\n", id="space-in-target"),
    pytest.param(b"BREW\r\n\r\n", id="no-version"),
])
def test_a_malformed_request_is_the_json_400(port: int, request_bytes: bytes) -> None:
    _assert_refused(_exchange(port, request_bytes), 400, "malformed HTTP request")


def test_an_80_kb_url_is_the_json_431(port: int) -> None:
    target = b"/runs?session=" + b"a" * 80_000
    _assert_refused(_exchange(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n"), 431,
                    f"request line and headers above {HEAD_LIMIT} bytes")


def test_a_1_mb_header_is_refused_before_the_rest_is_read(port: int) -> None:
    start = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
    # the first 64 KB of a 1 MB header, never finished: the answer may not wait for the rest
    started = time.monotonic()
    answer = _exchange(port, start + b"b" * (64 * 1024), wait_s=5.0)
    took = time.monotonic() - started
    _assert_refused(answer, 431, f"request line and headers above {HEAD_LIMIT} bytes")
    assert took < 2.0, took


def test_a_1_mb_header_sent_whole_is_refused_too(port: int) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (1024 * 1024) + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        sent = 0
        try:
            while sent < len(head):
                sent += conn.send(head[sent:sent + 65536])
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while sending: the server stopped reading
        try:
            received = conn.recv(65536)
        except ConnectionResetError:
            received = b""  # the reset may overtake the answer: it was refused either way
    assert not received or received.startswith(b"HTTP/1.1 431 "), received[:200]
    # and the server still answers
    status, _, _, _ = _exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: "
                                      b"close\r\n\r\n")
    assert status == 200


def test_the_page_still_loads_with_its_headers(port: int) -> None:
    status, headers, body, _ = _exchange(
        port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 200 and b'src="/main.js"' in body
    assert "script-src 'self'" in headers.get("content-security-policy", "")
