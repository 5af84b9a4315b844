"""Drill: Redis SIGKILLed mid-batch and restarted empty (no persistence): every queued and
unacked message and every chord counter is lost, and no run is."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_redis_killed_mid_batch_loses_no_run(cluster: Cluster) -> None:
    audit = drills.redis_restart(cluster)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    assert audit.extra["ended_before_fault"] < drills.RUNS  # the fault hit runs in flight
    assert set(audit.ended_by_status) <= {"SUCCESS", "FALLBACK"}
    # the lost messages were re-sent by the reconciler from the runs' stored next steps
    assert audit.reconciler_events.get("resent", 0) > 0, audit.reconciler_events
