"""Durations an answer works out from the times it binds to (`pipeline.rules.intervals`)."""

from __future__ import annotations

import pytest

from pipeline.rules.intervals import interval_durations

STARTS = ["2026-11-30T14:02:21Z Normal Started pod/checkout-service-bd1f30671-2w9m4",
          "2026-11-30T14:02:39Z Normal Started pod/checkout-service-bd1f30671-57lcq"]


@pytest.mark.parametrize(("text", "evidence", "worked_out"), [
    ("The first failure follows 30 seconds later.", ["13:12:00 WARN slow", "13:12:31 ERROR"],
     ["30 seconds"]),
    ("The first failure follows 30 seconds later.", ["13:12:00 WARN slow", "13:14:31 ERROR"],
     []),
    ("The deploy was 14 minutes before the onset.", ["deployed at 12:58:20", "onset 13:12:00"],
     ["14 minutes"]),
    ("The deploy was 5 minutes before the onset.", ["deployed at 12:58:20", "onset 13:12:00"],
     []),
    ("Both pods started within 30 seconds.", STARTS, ["30 seconds"]),
    ("Both pods started within 10 seconds.", STARTS, []),
    ("The pods started 18 seconds apart.", STARTS, ["18 seconds"]),
    ("The job ran 3 minutes, from 23:59:00 to 00:02:00.", [], ["3 minutes"]),
])
def test_intervals__a_duration_between_two_times_is_worked_out(
        text: str, evidence: list[str], worked_out: list[str]) -> None:
    assert [f.text for f in interval_durations(text, evidence)] == worked_out


def test_intervals__a_duration_with_no_times_is_not_worked_out() -> None:
    assert interval_durations("The pool timed out after 5000 ms.", ["timed out after 5 s"]) == []
