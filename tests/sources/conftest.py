"""The real Prometheus and Alertmanager servers, started once per session (tests/sources/
prom_harness.py); a local HTTP server that answers faults. Missing binaries skip the tests that
need them, and fail them under CI (`CI=true`). Every test that uses the servers is marked
`prometheus` here (`-m "not prometheus"` leaves them out)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.sources.fault_server import FaultServer
from tests.sources.prom_harness import HarnessError, PromStack, missing_binaries, service_missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "prom_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.prometheus)


@pytest.fixture(scope="session")
def prom_stack() -> Iterator[PromStack]:
    """Prometheus with the three scenarios backfilled, an Alertmanager per scenario."""
    missing = missing_binaries()
    if missing:
        service_missing("Prometheus/Alertmanager", f"not installed: {', '.join(missing)}")
    try:
        with PromStack.start() as stack:
            yield stack
    except HarnessError as exc:
        service_missing("Prometheus/Alertmanager", str(exc).splitlines()[0])


@pytest.fixture(scope="session")
def fault_server() -> Iterator[str]:
    """Base URL of a local server answering the fault named by the path's first segment."""
    server = FaultServer(("127.0.0.1", 0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
