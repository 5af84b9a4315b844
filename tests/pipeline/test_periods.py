"""Claims held to the time their evidence covers: the period a negative observation names,
against the windows its queries looked at (`pipeline.rules.periods`, through `scope_problem`
and the post-check), the window of an imported call, and a value given at a time against the
values its evidence gives at that time (`pipeline.rules.timed`)."""

from __future__ import annotations

import pytest
from spec.helpers import QUERY, check, evidence, verified_claim

from models.common import Verdict
from models.executor import ClaimKind
from models.gatekeeper import (
    GatekeeperOutcome,
    GatekeeperResult,
    Severity,
    VerifiedEvidence,
    VerifiedExecutorOutput,
)
from models.invocation import EvidenceStatus, TimeWindow
from models.verifier import ClaimCheck, Verification, VerifierOutput
from pipeline.rules.guards import post_check, scope_problem
from pipeline.rules.intervals import interval_durations
from pipeline.rules.periods import period_problem, stated_periods, window_seconds
from pipeline.rules.timed import timed_conflict, timed_values
from pipeline.rules.verifier_input import build_verifier_input


def output(*checks: ClaimCheck) -> VerifierOutput:
    return VerifierOutput(verdict=Verdict.PASS, groundedness_score=1.0, rationale="r",
                          claim_checks=list(checks), evidence_gaps=[])


FOUR_HOURS = TimeWindow(start="2026-11-30T11:00:00Z", end="2026-11-30T15:00:00Z")


@pytest.mark.parametrize(("text", "seconds"), [
    ("No deploys of payment-db in the last 24 hours.", [86400.0]),
    ("No alerts fired all night.", [21600.0]),
    ("nothing in the past week", [604800.0]),
    ("no errors in the past two hours", [7200.0]),
    ("no restarts in the last hour", [3600.0]),
    ("No errors for 3 hours after the rollback", [10800.0]),
    ("no deploys overnight", [21600.0]),
    ("No deploys in the window", []),
    ("the last deploy was v2.3.1", []),
])
def test_periods__each_period_named_with_its_length(text: str, seconds: list[float]) -> None:
    assert [s for _, s in stated_periods(text)] == seconds


@pytest.mark.parametrize(("text", "wider"), [
    ("No deploys of payment-db in the last 24 hours.", True),
    ("No alerts fired for notification-service all night.", True),
    ("No deploys this past week", True),
    ("no errors in the past two hours", False),
    ("No errors in the last 4 hours", False),
    ("No errors for 3 hours", False),
    ("No deploys of payment-db in the window", False),
])
def test_periods__longer_than_every_window_looked_at(text: str, wider: bool) -> None:
    problem = period_problem(text, [FOUR_HOURS])
    assert (problem is not None) is wider, problem
    if wider:
        assert "4 hours at most" in problem  # type: ignore[operator]


def test_periods__the_longest_window_counts_and_unknown_windows_say_nothing() -> None:
    day = TimeWindow(start="2026-11-29T15:00:00Z", end="2026-11-30T15:00:00Z")
    assert period_problem("No deploys in the last 24 hours", [FOUR_HOURS, day]) is None
    assert period_problem("No deploys in the last 24 hours", []) is None
    odd = TimeWindow(start="yesterday", end="now")
    assert window_seconds(odd) is None
    assert period_problem("No deploys in the last 24 hours", [odd]) is None


def _empty(window: TimeWindow) -> VerifiedEvidence:
    item = evidence("c1", "payment-db", path="$.scope.service", service="payment-db",
                    evidence_status=EvidenceStatus.NO_EVIDENCE)
    return item.model_copy(update={"scope": item.scope.model_copy(update={"window": window})})


def test_periods__scope_problem_names_the_period() -> None:
    problem = scope_problem("No deploys of payment-db in the last 24 hours", [_empty(FOUR_HOURS)],
                            negative=True)
    assert problem is not None and "last 24 hours" in problem
    assert scope_problem("No deploys of payment-db in the last 4 hours", [_empty(FOUR_HOURS)],
                         negative=True) is None


@pytest.mark.parametrize("text", ["No deploys of payment-db in the last 24 hours",
                                  "No deploys of payment-db all night"])
def test_periods__the_post_check_holds_a_direct_observation_to_its_window(text: str) -> None:
    claims = [verified_claim("c1", text, kind=ClaimKind.NEGATIVE_OBSERVATION)]
    outcome = GatekeeperOutcome(
        result=GatekeeperResult(status="pass", severity=Severity.PASS, rules=[],
                                failed_rules=[], checked_bindings=[]),
        verified_output=VerifiedExecutorOutput(claims=claims),
        verified_evidence=[_empty(FOUR_HOURS)])
    checked = post_check(output(check("c1", Verification.DIRECT_OBSERVATION)),
                         build_verifier_input(outcome, query=QUERY))
    assert checked.claim_checks[0].verification is not Verification.DIRECT_OBSERVATION
    assert checked.claim_checks[0].verification is not Verification.REASONABLE_INFERENCE


def test_intervals__a_day_is_no_interval_between_a_time_and_itself() -> None:
    # 24 hours after 14:00 is 14:00 again on the clock: not two times 24 hours apart
    assert interval_durations("No deploys in the last 24 hours.", ["deployed at 14:00:00"]) == []
    assert interval_durations("The job ran 3 minutes, from 23:59:00 to 00:02:00.", []) != []


# -- values given at a time (`pipeline.rules.timed`) ------------------------------------------

SERIES = ("active_connections of payment-db: baseline mean 47.9 (max 61.4) between "
          "2026-11-30T11:00:00Z and 2026-11-30T13:00:00Z; in window mean 47.8, peak 60.4 at "
          "2026-11-30T13:41:00Z; no shift from baseline")
POINTS = '[["2026-11-30T13:40:00Z", 46.9], ["2026-11-30T13:50:00Z", 46.4]]'


@pytest.mark.parametrize(("text", "differing"), [
    ("Connections peaked at 61.4 at 13:41.", ["61.4"]),  # the baseline's max, at the peak's time
    ("Connections peaked at 60.4 at 13:41.", []),
    ("Connections peaked at 61.4.", []),  # no time: the attribute rules' business
    ("It read 48 at 13:40.", ["48"]),
    ("It read about 47 at 13:40.", []),  # a rounding of 46.9
    ("It read 46.9 at 13:40:00.", []),
    ("It rose to 50 at 13:20.", []),  # no value stated at 13:20
    ("The error rate was 16.5% at 13:41.", []),  # another unit: another series
])
def test_timed__a_value_paired_with_a_time_its_evidence_pairs_otherwise(
        text: str, differing: list[str]) -> None:
    assert [f.text for f in timed_conflict(text, [SERIES, POINTS])] == differing


def test_timed__values_at_a_time_in_text_and_in_series_points() -> None:
    assert [(t, p, f.text) for t, p, f in timed_values("peak 60.4 at 2026-11-30T13:41:05Z")] == [
        (49265, 1, "60.4")]
    assert [(t, f.text) for t, _, f in timed_values(POINTS)] == [(49200, "46.9"), (49800, "46.4")]


# -- an imported call's window (`pipeline.importers.evidence`) --------------------------------

@pytest.mark.parametrize(("arguments", "result", "window"), [
    ({"service": "x", "start": "2026-11-30T11:00:00Z", "end": "2026-11-30T15:00:00Z"},
     {"deployments": []}, ("2026-11-30T11:00:00Z", "2026-11-30T15:00:00Z")),
    ({"service": "x"}, {"scope": {"window": {"start": "2026-11-30T07:00:00Z",
                                             "end": "2026-11-30T09:00:00Z"}}, "alerts": []},
     ("2026-11-30T07:00:00Z", "2026-11-30T09:00:00Z")),
    ({"query": "up", "start": 1764500400, "end": 1764504000}, {"data": []},
     ("2025-11-30T11:00:00Z", "2025-11-30T12:00:00Z")),
    ({"service": "x", "since": "1h"}, {"alerts": []}, None),
    ({"start": "2026-11-30T15:00:00Z", "end": "2026-11-30T11:00:00Z"}, {"alerts": []}, None),
    ({"start": True, "end": 5}, "some text", None),
])
def test_import__the_window_a_call_looked_at_is_its_scope(
        arguments: dict[str, object], result: object,
        window: tuple[str, str] | None) -> None:
    from pipeline.importers.evidence import invocation_of
    from pipeline.importers.record import ImportedCall

    call = invocation_of(ImportedCall("t1", "list_alerts", arguments, result),
                         max_items=100, max_bytes=65536)
    assert call.projection is not None
    found = call.projection.scope.window if call.projection.scope else None
    assert (None if found is None else (found.start, found.end)) == window
