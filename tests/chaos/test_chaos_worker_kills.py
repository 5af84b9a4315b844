"""Drill: worker processes SIGKILLed again and again in the middle of model calls and tool
chords: every run ends once, and every request the model server saw is an attempt row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_workers_killed_repeatedly_every_run_ends_once(cluster: Cluster) -> None:
    audit = drills.worker_kills(cluster)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    assert audit.extra["kills"] == 5
    assert sum(audit.extra["requests_in_flight_at_kills"].values()) > 0  # kills hit calls
    assert set(audit.ended_by_status) <= {"SUCCESS", "FALLBACK"}, (
        audit.extra["failures"], _tracebacks(cluster.log_dir))


def _tracebacks(log_dir: Path, limit: int = 3) -> list[str]:
    """The last tracebacks the workers logged (a node that fails its run logs one)."""
    found: list[str] = []
    for log in sorted(log_dir.glob("worker-*.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        found += [f"{log.name}: Traceback{block[:3000]}" for block in text.split("Traceback")[1:]]
    return found[-limit:]
