"""A value given as the extreme of its kind, read against the list it binds into
(`pipeline.rules.extremes`): pure functions, then through `verity check-answer`'s path."""

from __future__ import annotations

import json

import pytest

from models.verifier import Verification
from pipeline.rules.extremes import extremes
from tests.imported import judged

LINES = [
    "00:01:02 GET /v2/servers/detail status: 200 time: 0.2713401",
    "00:01:31 GET /v2/servers/detail status: 200 time: 0.4467819",
    "00:02:10 GET /v2/servers/detail status: 200 time: 0.2511002",
]
HITS = [json.dumps({"message": "authorize slow", "latency_ms": n, "timeout_ms": 5000})
        for n in (4006, 4565, 4392)]


@pytest.mark.parametrize(("text", "bound", "records", "held"), [
    ("The slowest one, at 00:01:31, took 0.4467819 s.", LINES[1], LINES, {"slowest"}),
    ("The fastest one took 0.2511002 s.", LINES[2], LINES, {"fastest"}),
    ("The slowest authorization took 4565 ms.", HITS[1], HITS, {"slowest"}),
    # the timeout of every record is another field: not compared
    ("The slowest authorization took 4565 ms, under the 5000 ms timeout.", HITS[1], HITS,
     {"slowest"}),
])
def test_extremes__a_superlative_the_list_bears_out_is_said(
        text: str, bound: str, records: list[str], held: set[str]) -> None:
    found = extremes(text, bound, records)
    assert found.held == held and found.problem is None


@pytest.mark.parametrize(("text", "bound", "records", "more"), [
    ("The slowest one took 0.2713401 s.", LINES[0], LINES, "0.446782"),
    ("The fastest authorization took 4392 ms.", HITS[2], HITS, "4006"),
])
def test_extremes__a_more_extreme_record_of_the_list_contradicts(
        text: str, bound: str, records: list[str], more: str) -> None:
    found = extremes(text, bound, records)
    assert found.problem is not None and more in found.problem


@pytest.mark.parametrize("text", [
    "The slowest one took 0.27 s.",  # a value the record does not write so: not read
    "Most of the 512 errors came from one pod.",  # a share, no superlative
])
def test_extremes__what_it_cannot_place_is_left_alone(text: str) -> None:
    found = extremes(text, LINES[0], LINES)
    assert found.held == frozenset() and found.problem is None


@pytest.mark.parametrize(("claimed", "expected"), [
    ("0.4467819", Verification.DIRECT_OBSERVATION),
    ("0.2713401", Verification.CONTRADICTED),
])
def test_extremes__an_imported_answer_is_held_to_every_line_of_its_log(
        claimed: str, expected: Verification) -> None:
    claim = judged(f"The slowest request to /v2/servers/detail took {claimed} s.\n",
                   ("api.log", "\n".join(LINES)))
    assert claim.verification is expected, claim.note
