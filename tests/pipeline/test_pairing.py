"""An identifier paired with another record's time (`pipeline.rules.pairing`)."""

from __future__ import annotations

import json

import pytest

from models.verifier import Verification
from pipeline.rules.facts import extract_facts
from pipeline.rules.pairing import Record, pairing_problem
from tests.imported import judged

LINES = [
    "2026-11-30T08:41:46Z Warning OOMKilled pod/inventory-service-dce91a01f-6g9wr exit 137",
    "2026-11-30T08:43:12Z Warning OOMKilled pod/inventory-service-dce91a01f-q964j exit 137",
    json.dumps({"first_ts": "2026-11-30T08:41:46Z", "reason": "OOMKilled", "count": 2}),
]
RECORDS = [Record(t, tuple(f for f in extract_facts(t) if f.kind.value == "identifier"))
           for t in LINES]


@pytest.mark.parametrize(("text", "named"), [
    ("The first OOMKill hit inventory-service-dce91a01f-q964j at 08:41:46.", "6g9wr"),
    ("The first OOMKill hit pod q964j at 08:41:46.", "6g9wr"),  # a pod by its last part
])
def test_pairing__another_peers_time_contradicts(text: str, named: str) -> None:
    problem = pairing_problem(text, RECORDS)
    assert problem is not None and named in problem


@pytest.mark.parametrize("text", [
    "The first OOMKill hit inventory-service-dce91a01f-6g9wr at 08:41:46.",
    "inventory-service-dce91a01f-q964j was OOMKilled at 08:43:12.",
    # several pods of the family: which time is whose is no one reading
    "inventory-service-dce91a01f-6g9wr and inventory-service-dce91a01f-q964j were OOMKilled "
    "at 08:41:46 and 08:43:12.",
    # a time to the minute (a window's bound) pairs nothing
    "inventory-service-dce91a01f-q964j was OOMKilled between 08:41 and 08:44.",
    # no record holds the time
    "inventory-service-dce91a01f-q964j was OOMKilled at 08:50:00.",
])
def test_pairing__what_pairs_rightly_or_not_at_all_is_left_alone(text: str) -> None:
    assert pairing_problem(text, RECORDS) is None


@pytest.mark.parametrize(("pod", "expected"), [
    ("inventory-service-dce91a01f-6g9wr", Verification.DIRECT_OBSERVATION),
    ("inventory-service-dce91a01f-q964j", Verification.CONTRADICTED),
])
def test_pairing__an_imported_answer_is_held_to_the_records_at_its_time(
        pod: str, expected: Verification) -> None:
    claim = judged(f"The first OOMKill hit {pod} at 08:41:46.\n",
                   ("events.log", "\n".join(LINES[:2])))
    assert claim.verification is expected, claim.note
