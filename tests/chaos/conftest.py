"""Fixtures of the chaos drills: one private Redis and PostgreSQL per session, started by the
tests on free ports of 127.0.0.1 (see `harness`), and a fresh `Cluster` per test: its own
database, an empty Redis, and every worker and fake server it starts ended afterwards.

A missing redis-server, initdb or pg_ctl skips the drills, and fails them under CI=true.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import Cluster, MissingBinaryError, Services


@pytest.fixture(scope="session")
def chaos_services() -> Iterator[Services]:
    """The session's private Redis and PostgreSQL."""
    try:
        services = Services().start()
    except MissingBinaryError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"chaos drills need their own services: {exc}", pytrace=False)
        pytest.skip(f"chaos drills need their own services: {exc}")
    yield services
    services.close()


@pytest.fixture
def cluster(chaos_services: Services, tmp_path: Path) -> Iterator[Cluster]:
    """A drill's world on the private services; worker logs stay in `tmp_path`."""
    with Cluster(chaos_services, tmp_path / "cluster") as started:
        yield started
