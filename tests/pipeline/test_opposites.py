"""Words of a closed class whose other member the evidence states (`pipeline.rules.opposites`):
an outcome, a setting and its opposite."""

from __future__ import annotations

import pytest

from models.verifier import Verification
from pipeline.rules.opposites import outcome_conflict, setting_conflict, settings_of
from tests.imported import judged

AUTH_FAILURE = ("Jun 15 12:12:34 combo sshd(pam_unix)[19939]: authentication failure; logname= "
                "uid=0 euid=0 tty=NODEVssh ruser= rhost=218.188.2.4")
FAILED_PASSWORD = "Dec 10 06:55:46 LabSZ sshd[24200]: Failed password for root from 5.36.59.76"
ACCEPTED = "Dec 10 09:32:20 LabSZ sshd[24680]: Accepted password for fztu from 119.137.62.142"


@pytest.mark.parametrize(("text", "evidence", "conflicting"), [
    ("User test logged in from 218.188.2.4.", [AUTH_FAILURE], ["logged in"]),
    ("One attempt succeeded: root got in from 5.36.59.76.", [FAILED_PASSWORD], ["succeeded"]),
    # the line states a success, or the claim speaks of failure too, or no line has an outcome
    ("fztu logged in from 119.137.62.142.", [ACCEPTED], []),
    ("root failed to log in, then logged in from 5.36.59.76.", [FAILED_PASSWORD], []),
    ("A login from 5.36.59.76 succeeded.", [FAILED_PASSWORD, ACCEPTED], []),
    ("The request succeeded in 154 ms.", ["GET /api/search?q=3df2bba9 200 in 154 ms"], []),
    ("An authentication failure came from rhost 218.188.2.4.", [AUTH_FAILURE], []),
])
def test_outcome__a_success_its_lines_state_as_a_failure(
        text: str, evidence: list[str], conflicting: list[str]) -> None:
    assert [f.text for f in outcome_conflict(text, evidence)] == conflicting


def test_settings__a_setting_is_named_by_the_word_before_its_verb() -> None:
    assert settings_of("On 2005-09-17 node card R76-M1-N8 reported its clock mode was High.") == {
        "mode": {"high"}}
    assert settings_of("Node card clock mode: Clock Mode is Low") == {"mode": {"low"}}
    assert settings_of("ready=false, started=true") == {"ready": {"false"}, "started": {"true"}}


@pytest.mark.parametrize(("text", "evidence", "conflicting"), [
    ("Its clock mode was High.", ["Node card clock mode: Clock Mode is Low"], ["high"]),
    ("At 14:02 it reported ready=true.", ["pod ready=false restarts=3"], ["true"]),
    # the same value, another setting, or a value that is no opposite of the one stated
    ("Its clock mode was Low.", ["Clock Mode is Low"], []),
    ("Its fan speed was High.", ["Clock Mode is Low"], []),
    ("By 14:05 it was down.", ["at 14:05 it was up"], []),
    ("The breaker state is open.", ["breaker state is half-open"], []),
    ("Its clock mode was High.", ["Clock Mode is Low", "Clock Mode is High"], []),
])
def test_settings__a_value_its_evidence_states_only_the_opposite_of(
        text: str, evidence: list[str], conflicting: list[str]) -> None:
    assert [f.text for f in setting_conflict(text, evidence)] == conflicting


@pytest.mark.parametrize(("answer", "expected"), [
    ("User test logged in from 218.188.2.4.\n", Verification.CONTRADICTED),
    ("An authentication failure came from rhost 218.188.2.4.\n",
     Verification.DIRECT_OBSERVATION),
])
def test_outcome__an_imported_answer_is_held_to_the_line_it_binds(
        answer: str, expected: Verification) -> None:
    claim = judged(answer, ("linux.log", AUTH_FAILURE + "\n"))
    assert claim.verification is expected, claim.note
