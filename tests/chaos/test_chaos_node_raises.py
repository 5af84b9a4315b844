"""Drill: a node whose agent raises a plain exception (a bug) ends its run FAILED, once, with
a failure event naming the error; the rest of the batch is untouched."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.faulty_runtime import ROLES
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_a_node_that_raises_fails_its_run_once(cluster: Cluster) -> None:
    audit = drills.node_raises(cluster)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    each = drills.RUNS // 5
    assert audit.extra["ended_by_raising_role"] == {
        "none": {"SUCCESS": each}, **{role: {"FAILED": each} for role in ROLES}}
    failures = cluster.query(
        "SELECT r.query, e.payload FROM run_event e JOIN diagnosis_run r USING (run_id) "
        "WHERE r.status = 'FAILED' AND e.kind = 'failed'")
    assert len(failures) == len(ROLES) * each
    for query, payload in failures:
        role = next(r for r in ROLES if f"[drill raise: {r}]" in query)
        assert f"DrillBugError: drill: the {role} raised" in json.dumps(payload), payload
