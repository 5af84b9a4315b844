"""Drill: the model asks for two different tool calls under one tool_use id in a turn: the
second is refused with an error naming the id, never overwriting the first, and every run goes
on and ends once."""

from __future__ import annotations

import json

import pytest

from tests.chaos import drills
from tests.chaos.harness import Cluster

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_a_duplicate_tool_use_id_never_overwrites_the_first_call(cluster: Cluster) -> None:
    audit = drills.duplicate_tool_use(cluster)
    assert not audit.problems(), json.dumps(audit.summary(), indent=1)
    rows = audit.extra["duplicate_id_rows"]
    assert rows["rows"] == rows["first_call_kept"] == drills.RUNS
    # the Claude executor answers the second action with an is_error result naming the id
    assert audit.extra["duplicate_ids_refused"]["to_the_model"] == drills.RUNS
    assert set(audit.ended_by_status) <= {"SUCCESS", "FALLBACK"}  # the runs went on
