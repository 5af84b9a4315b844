"""Drill: every run cancelled while its Verifier call is held 30 s by the model server: the
calls are aborted within about a second, their threads serve other runs at once, and each
aborted call is an attempt row."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_cancel_during_a_30s_model_call_interrupts_it(cluster: Cluster) -> None:
    audit = drills.cancel_during_model_call(cluster, hold_s=30)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    assert audit.extra["cancel"]["cancelled"] == drills.RUNS
    outcomes = cluster.query("SELECT outcome, count(*) FROM llm_attempt WHERE role = 'verifier'"
                             " GROUP BY outcome")
    assert dict(outcomes).get("cancelled") == drills.RUNS, outcomes
