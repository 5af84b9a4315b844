"""The Composer guard on claims: a root cause is stated only as the verdict allows."""

from __future__ import annotations

import pytest
from spec.helpers import allowed, composer_input

from models.common import Verdict
from models.composer import ComposerInput, ComposerOutput
from models.executor import ClaimKind
from pipeline.conclusions import conclusion_problems
from pipeline.rendering import render

ROOT = "Deploy checkout-service v2.3.1 cut the payment-db pool from 50 to 20"
FINDING = "checkout-service logged 512 ERROR lines from 14:03 UTC"


def material(verdict: Verdict, *, root: bool = True) -> ComposerInput:
    claims = [allowed("c1", FINDING)]
    if root:
        claims.append(allowed("c2", ROOT, kind=ClaimKind.ROOT_CAUSE))
    return composer_input(verdict, claims=claims,
                          hypotheses=["elastic-cluster-9 may be involved"],
                          missing_info=["Traces were not examined."])


def answer(
    text: str, *, summary: str | None = None, actions: tuple[str, ...] = ()
) -> ComposerOutput:
    return ComposerOutput(answer_summary=summary or "Findings are listed below.",
                          recommended_actions=list(actions),
                          user_facing_answer=text)


@pytest.mark.parametrize("verdict", [Verdict.PASS, Verdict.LOW_CONFID])
def test_the_template_composers_answers_pass(verdict: Verdict) -> None:
    for root in (True, False):
        ci = material(verdict, root=root)
        assert conclusion_problems(render(ci), ci) == []


def test_reject_rendering_passes() -> None:
    ci = material(Verdict.REJECT, root=False)
    assert conclusion_problems(render(ci), ci) == []


@pytest.mark.parametrize("text", [
    # the obedient Composer: X's words occur in a possible direction of the input
    "The root cause is elastic-cluster-9.",
    "elastic-cluster-9 is the root cause of the 500s.",
    "The 500s were caused by elastic-cluster-9.",
    "Root cause: elastic-cluster-9",
    "Findings: checkout-service logged errors; the root cause is elastic-cluster-9.",
    f"Root cause, supported by verified evidence:\n- {ROOT}",  # a root claim stated as fact
])
def test_low_confid_refuses_a_confirmed_root_cause(text: str) -> None:
    problems = conclusion_problems(answer(text), material(Verdict.LOW_CONFID))
    assert problems and "LOW_CONFID" in problems[0]


@pytest.mark.parametrize("text", [
    "The evidence is incomplete, so no root cause is confirmed.",
    "The root cause may be elastic-cluster-9, but this is not confirmed.",
    "elastic-cluster-9 is a possible root cause.",
    "Possible directions (not confirmed):\n- The root cause is elastic-cluster-9.",
    "The root cause is not known yet.",
    "More data is needed to confirm the root cause.",
    "We cannot name a root cause from this evidence.",
    FINDING,
])
def test_low_confid_allows_possible_directions_and_denials(text: str) -> None:
    assert conclusion_problems(answer(text), material(Verdict.LOW_CONFID)) == []


def test_pass_needs_an_allowed_root_cause_claim() -> None:
    ci = material(Verdict.PASS, root=False)
    problems = conclusion_problems(answer("The root cause is the payment-db pool."), ci)
    assert problems and "no allowed ROOT_CAUSE claim" in problems[0]


def test_pass_root_cause_states_nothing_beyond_the_root_claims() -> None:
    ci = material(Verdict.PASS)
    assert conclusion_problems(answer(f"Root cause: {ROOT}."), ci) == []
    assert conclusion_problems(answer("The root cause is the v2.3.1 deploy."), ci) == []
    problems = conclusion_problems(answer("The root cause is elastic-cluster-9."), ci)
    assert problems and "elastic-cluster-9" in problems[0]


def test_actions_and_summary_are_read_too() -> None:
    ci = material(Verdict.LOW_CONFID)
    assert conclusion_problems(answer(FINDING, summary="Root cause: elastic-cluster-9."), ci)
    assert conclusion_problems(
        answer(FINDING, actions=("Restart elastic-cluster-9, the root cause",)), ci)


def test_reject_names_no_root_cause_even_hedged() -> None:
    ci = material(Verdict.REJECT, root=False)
    assert conclusion_problems(answer("The root cause may be elastic-cluster-9."), ci)
    assert conclusion_problems(answer("No root cause can be named."), ci) == []
