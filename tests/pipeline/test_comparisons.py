"""A comparison between two values a claim gives (`pipeline.rules.comparisons`)."""

from __future__ import annotations

import pytest

from models.verifier import Verification
from pipeline.rules.comparisons import compared
from tests.imported import judged


@pytest.mark.parametrize(("text", "held"), [
    ("lowered the limit from 1024Mi to 512Mi, below the 690 MiB the service used", {"below"}),
    ("a 512Mi limit below what the service normally uses (~690 MiB)", {"below"}),
    ("p99 at 4392 ms, above the 1000 ms alert threshold", {"above"}),
    ("the pool of 20 is less than the 50 it had", {"less", "than"}),
    ("2.5 s exceeds the 2000 ms budget", {"exceeds"}),
])
def test_comparisons__two_values_that_compare_so_say_the_word(text: str, held: set[str]) -> None:
    found = compared(text)
    assert (found.held, found.problem) == (frozenset(held), None)


@pytest.mark.parametrize(("text", "problem"), [
    ("p99 at 392 ms, above the 1000 ms alert threshold", "392 ms is above 1000 ms"),
    ("a 1024Mi limit below the 690 MiB the service used", "1024Mi is below 690 MiB"),
])
def test_comparisons__two_values_that_compare_the_other_way_contradict(
        text: str, problem: str) -> None:
    found = compared(text)
    assert found.problem is not None and problem in found.problem


@pytest.mark.parametrize("text", [
    "error rate above baseline",  # one value: the word check's to judge
    "going from 102-136 ms to more than 4 s",  # a bound on one value
    "4392 ms over the 2 hours",  # "over" a period
    "waited 5000 ms beyond 3 retries",  # values of two dimensions
])
def test_comparisons__what_compares_no_two_values_is_left_alone(text: str) -> None:
    found = compared(text)
    assert (found.held, found.problem) == (frozenset(), None)


@pytest.mark.parametrize(("limit", "expected"), [
    ("512Mi", Verification.DIRECT_OBSERVATION),
    ("1024Mi", Verification.CONTRADICTED),
])
def test_comparisons__an_imported_answer_is_held_to_its_values(
        limit: str, expected: Verification) -> None:
    claim = judged(f"The memory limit of {limit} is below the 690 MiB working set.\n",
                   ("describe.txt", f"memory limit {limit}\nworking set 690 MiB"))
    assert claim.verification is expected, claim.note
