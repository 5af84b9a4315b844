"""Drill: PostgreSQL stopped for 45 s mid-batch (backends terminated, connections refused),
then started again on the same port: the outage is waited out and every run ends once."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_postgres_stopped_45s_mid_batch_every_run_ends_once(cluster: Cluster) -> None:
    audit = drills.postgres_outage(cluster, outage_s=45)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    assert audit.extra["ended_before_fault"] < drills.RUNS
    assert set(audit.ended_by_status) <= {"SUCCESS", "FALLBACK"}
