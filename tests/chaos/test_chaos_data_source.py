"""Drill: data sources broken between submit and the worker (folder deleted, scenario.json
garbage): their tools end ERROR with a one-line message and the runs end once; the intact
runs of the batch succeed; submit refuses a source that is not one, leaving no row."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_a_source_broken_at_worker_time_ends_its_runs_cleanly(cluster: Cluster) -> None:
    audit = drills.bad_data_source(cluster)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    by_source = audit.extra["ended_by_source"]
    assert sum(sum(by_source[k].values()) for k in ("deleted", "corrupt")) > drills.RUNS // 2
    assert audit.extra["broken_source_tools"]["statuses"].get("ERROR", 0) > 0
