"""A claim read against the whole lists of records it binds into: the only one, tallies
(`pipeline.rules.listed`): pure functions, then through `verity check-answer`'s path."""

from __future__ import annotations

import json

import pytest

from models.verifier import Verification
from pipeline.rules.facts import Fact, extract_facts
from pipeline.rules.listed import Listed, claims_only, exclusivity_problem, tallied_words
from tests.imported import judged

HITS = [
    {"level": "ERROR", "message": "GET /api/search failed: internal error",
     "pod": "search-api-cda7299da-2twzm"},
    {"level": "WARN", "message": "query parse warning", "pod": "search-api-cda7299da-lfpm6"},
    {"level": "ERROR", "message": "GET /api/search failed: internal error",
     "pod": "search-api-cda7299da-2twzm"},
]
RECORDS = [json.dumps(h) for h in HITS]


def _fact(text: str) -> Fact:
    (fact,) = [f for f in extract_facts(text) if f.text == text]
    return fact


@pytest.mark.parametrize(("text", "named"), [
    ("The errors come from search-api-cda7299da-2twzm only.", ["search-api-cda7299da-2twzm"]),
    ("Only pod search-api-cda7299da-2twzm fails.", ["search-api-cda7299da-2twzm"]),
    ("All 49 coupon lines came from pod checkout-service-bd1f30671-r6mx2.",
     ["checkout-service-bd1f30671-r6mx2"]),
    ("The errors come solely from `search-api-cda7299da-2twzm`.", ["search-api-cda7299da-2twzm"]),
    ("The errors come from a single pod, search-api-cda7299da-2twzm.",
     ["search-api-cda7299da-2twzm"]),
    ("All of the slow responses come from a single pod, `search-api-cda7299da-2twzm`.",
     ["search-api-cda7299da-2twzm"]),
    ("Every request was made by just one tenant: 54fadb412c4e40cdbaed9335e4c35a9e.",
     ["54fadb412c4e40cdbaed9335e4c35a9e"]),
    ("The errors come only from pod, search-api-cda7299da-2twzm.", ["search-api-cda7299da-2twzm"]),
    # no exclusivity, or one about something else
    ("The first error came from search-api-cda7299da-2twzm.", []),
    ("Responses took 4.0 to 4.6 s each (the slowest was 4565 ms, on "
     "payment-gateway-5c375aac1-kb8zw).", []),
    ("Only 3 of 200 requests failed on search-api-cda7299da-2twzm.", []),
    ("One pod, search-api-cda7299da-2twzm, restarted.", []),
    ("A single error came from search-api-cda7299da-2twzm.", []),
])
def test_exclusive__the_identifier_given_as_the_only_one(text: str, named: list[str]) -> None:
    assert [f.text for f in claims_only(text)] == named


def test_exclusive__another_of_the_family_in_a_record_it_speaks_of_contradicts() -> None:
    records = [*RECORDS, json.dumps({**HITS[0], "pod": "search-api-cda7299da-lfpm6"})]
    problem = exclusivity_problem("The errors come from search-api-cda7299da-2twzm only.",
                                  _fact("search-api-cda7299da-2twzm"), records)
    assert problem is not None and "search-api-cda7299da-lfpm6" in problem


def test_exclusive__records_of_another_kind_do_not() -> None:
    """lfpm6's line is a WARN: the errors do come from 2twzm only."""
    assert exclusivity_problem("The errors come from search-api-cda7299da-2twzm only.",
                               _fact("search-api-cda7299da-2twzm"), RECORDS) is None


def test_exclusive__nor_another_family() -> None:
    records = [*RECORDS, json.dumps({**HITS[0], "pod": "web-frontend-cca0fd3d9-7xv7z"})]
    assert exclusivity_problem("The errors come from search-api-cda7299da-2twzm only.",
                               _fact("search-api-cda7299da-2twzm"), records) is None


def test_exclusive__a_pod_given_by_its_last_part_has_the_records_family() -> None:
    records = [*RECORDS, json.dumps({**HITS[0], "pod": "search-api-cda7299da-lfpm6"})]
    text = "Only pod 2twzm fails; lfpm6 keeps serving 200s."
    (only,) = claims_only(text)
    problem = exclusivity_problem(text, only, records)
    assert problem is not None and "lfpm6" in problem
    assert exclusivity_problem(text, only, RECORDS) is None


@pytest.mark.parametrize(("lines", "expected"), [
    (["ERROR GET /api/search failed pod=search-api-cda7299da-2twzm",
      "ERROR GET /api/search failed pod=search-api-cda7299da-lfpm6"],
     Verification.CONTRADICTED),
    (["ERROR GET /api/search failed pod=search-api-cda7299da-2twzm",
      "INFO GET /api/search 200 pod=search-api-cda7299da-lfpm6"],
     Verification.DIRECT_OBSERVATION),
])
def test_exclusive__an_imported_answer_is_held_to_every_line_of_its_log(
        lines: list[str], expected: Verification) -> None:
    claim = judged("The failures come from search-api-cda7299da-2twzm only.\n",
                   ("search_logs.log", "\n".join(lines)))
    assert claim.verification is expected, claim.note


# -- tallies: a number word that counts the records it speaks of -------------------------------

LOG = ["2015-10-18 18:01:47 INFO RMContainerAllocator: reduce slow-start threshold not met",
       "2015-10-18 18:01:48 INFO TaskAttemptListener: progress of m_000000_0 is 0.106",
       "2015-10-18 18:01:52 INFO RMContainerAllocator: reduce slow-start threshold not met",
       "2015-10-18 18:01:53 WARN LeaseRenewer: failed to renew lease"]


@pytest.mark.parametrize(("text", "complete", "said"), [
    ("The allocator twice logged that the reduce slow-start threshold was not met.", True,
     {"twice"}),
    ("The allocator logged the slow-start threshold three times.", True, set()),
    # a sample of lines beside a larger total counts nothing
    ("The allocator twice logged that the reduce slow-start threshold was not met.", False,
     set()),
    # nothing in the clause tells the records apart: the word counts nothing
    ("There were four lines.", True, set()),
])
def test_tallies__a_number_word_is_said_by_as_many_records_it_speaks_of(
        text: str, complete: bool, said: set[str]) -> None:
    assert tallied_words(text, [Listed(LOG[0], LOG, complete)]) == said


@pytest.mark.parametrize(("count", "expected"), [
    ("twice", Verification.DIRECT_OBSERVATION),
    ("three times", Verification.CONTRADICTED),
])
def test_tallies__an_imported_answer_counts_the_lines_of_its_log(
        count: str, expected: Verification) -> None:
    claim = judged("RMContainerAllocator logged the reduce slow-start threshold not met "
                   f"{count}.\n", ("am.log", "\n".join(LOG)))
    assert claim.verification is expected, claim.note
