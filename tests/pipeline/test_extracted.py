"""`pipeline.rules.extracted`: an extractor's reply laid over the answer it came from. Only text
that stands in the answer becomes a claim, each span is found by code, critical is recomputed,
and a reply with nothing usable gives the splitter's claims, flagged. Then `extract_claims`:
the extractor called under the retry rules, falling back when it cannot answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.executor import ClaimKind
from pipeline.checks import extract_claims
from pipeline.errors import ConfigurationError, ProviderUnavailableError, RunCancelledError
from pipeline.rules.extracted import Extraction, claims_from_reply
from pipeline.rules.prose import ProseClaim, split_claims
from pipeline.run.attempts import AttemptLog
from tests.doubles import Scripted

ANSWER = """## Summary
checkout-service has returned HTTP 500s since 14:03 UTC.

- 512 ERROR lines mention "connection pool exhausted".
- Deploy v2.3.1 went out at 14:01.
- No alerts fired for payment-db.

**Root cause:** the v2.3.1 deploy cut the payment-db pool from 50 to 20 connections.

| service | status | errors |
|---|---|---|
| checkout-service | degraded | 512 |

## Next steps
1. Roll back checkout-service to v2.3.0.

Why did this happen?
"""
INVENTED = "The root cause is a DNS outage."


def _item(text: str, kind: Any = "FINDING", *, hedged: Any = False, action: Any = False,
          critical: Any = False) -> dict[str, Any]:
    return {"text": text, "kind": kind, "hedged": hedged, "action": action,
            "critical": critical}


def _faithful(answer: str = ANSWER) -> list[dict[str, Any]]:
    """The reply of a model that reads the answer as the splitter does."""
    return [_item(c.text, c.kind.value, hedged=c.hedged, action=c.action, critical=c.critical)
            for c in split_claims(answer)]


def _reply(items: Any) -> str:
    return json.dumps({"claims": items})


def _texts(extraction: Extraction) -> list[str]:
    return [c.text for c in extraction.claims]


def _assert_over(answer: str, claims: list[ProseClaim]) -> None:
    for claim in claims:
        assert answer[claim.start:claim.end] == claim.text
    spans = sorted((c.start, c.end) for c in claims)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))


# -- what a faithful model gives -------------------------------------------------------------


def test_extracted__exact_claims_give_the_splitters_claims() -> None:
    extraction = claims_from_reply(ANSWER, _reply(_faithful()))
    assert extraction.claims == split_claims(ANSWER)
    assert (extraction.fallback, extraction.dropped, extraction.omitted) == (False, 0, 0)
    assert extraction.note == "claims read by the extractor: 7 kept"


def test_extracted__claims_in_another_order_stand_in_the_answers_order() -> None:
    extraction = claims_from_reply(ANSWER, _reply(list(reversed(_faithful()))))
    assert extraction.claims == split_claims(ANSWER)


def test_extracted__markers_pipes_and_the_frames_escape_are_cut_as_the_splitter_cuts() -> None:
    answer = "## Findings\n- Deploy v2.3.1 went out at 14:01.\n\n| a | b |\n|---|---|\n" \
             "| checkout-service | </degraded> |\n"
    extraction = claims_from_reply(answer, _reply([
        _item("- Deploy v2.3.1 went out at 14:01."),
        _item("| checkout-service | <\\/degraded> |")]))
    assert _texts(extraction) == _texts(Extraction(split_claims(answer)))
    assert [c.section for c in extraction.claims] == ["Findings", "Findings"]


def test_extracted__the_models_finer_claims_keep_their_units_section() -> None:
    answer = "## Root cause\nThe pool shrank to 20 in v2.3.1, and checkout-service ran dry."
    extraction = claims_from_reply(answer, _reply([
        _item("The pool shrank to 20 in v2.3.1,", "ROOT_CAUSE"),
        _item("and checkout-service ran dry.", "FINDING")]))
    assert _texts(extraction) == ["The pool shrank to 20 in v2.3.1,",
                                  "and checkout-service ran dry."]
    assert [c.section for c in extraction.claims] == ["Root cause", "Root cause"]
    # under a "Root cause" heading the splitter reads a root cause: a label may not make it less
    assert [c.kind for c in extraction.claims] == [ClaimKind.ROOT_CAUSE, ClaimKind.ROOT_CAUSE]
    _assert_over(answer, extraction.claims)


def test_extracted__a_span_across_units_has_no_section() -> None:
    answer = "## Evidence\nThe pool is exhausted. The deploy v2.3.1 went out at 14:01."
    extraction = claims_from_reply(answer, _reply([_item(answer.split("\n", 1)[1])]))
    assert [c.section for c in extraction.claims] == [None]


# -- what a model gets wrong -----------------------------------------------------------------


def test_extracted__a_claim_with_a_changed_character_is_dropped() -> None:
    items = _faithful()
    items[1] = _item(items[1]["text"].replace("512", "513"))
    items[2] = _item(items[2]["text"].replace("v2.3.1", "v2.3.l"))
    extraction = claims_from_reply(ANSWER, _reply(items))
    assert not extraction.fallback
    assert (extraction.dropped, extraction.omitted) == (2, 2)
    assert not any("513" in t or "v2.3.l" in t for t in _texts(extraction))
    # the two claims it got wrong are checked as the answer states them
    assert _texts(extraction) == [c.text for c in split_claims(ANSWER)]
    assert "2 of its reply dropped" in extraction.note
    assert "2 it left out added back from the splitter" in extraction.note
    _assert_over(ANSWER, extraction.claims)


def test_extracted__an_invented_claim_is_dropped_never_written_into_the_answer() -> None:
    extraction = claims_from_reply(ANSWER, _reply(
        [_item(INVENTED, "ROOT_CAUSE"), *_faithful()]))
    assert INVENTED not in _texts(extraction)
    assert not any(INVENTED in c.plain for c in extraction.claims)
    assert extraction.claims == split_claims(ANSWER) and extraction.dropped == 1


def test_extracted__a_claim_reworded_by_whitespace_is_dropped() -> None:
    answer = "- Deploy v2.3.1 went out at 14:01,\n  two minutes before the onset.\n"
    extraction = claims_from_reply(answer, _reply([
        _item("Deploy v2.3.1 went out at 14:01, two minutes before the onset."),
        _item("Deploy v2.3.1 went out at 14:01,")]))
    assert _texts(extraction) == ["Deploy v2.3.1 went out at 14:01,"]
    assert extraction.dropped == 1


def test_extracted__duplicate_texts_take_the_next_occurrence_in_order() -> None:
    answer = ("## Evidence\n- Pool exhausted on payment-db.\n\n"
              "## Root cause\n- Pool exhausted on payment-db.\n")
    first = answer.index("Pool")
    second = answer.index("Pool", first + 1)
    extraction = claims_from_reply(answer, _reply([_item("Pool exhausted on payment-db.")] * 3))
    assert [(c.start, c.section) for c in extraction.claims] == [
        (first, "Evidence"), (second, "Root cause")]
    assert extraction.dropped == 1


@pytest.mark.parametrize("order", ["whole first", "part first"])
def test_extracted__overlapping_texts_are_dropped_after_the_first(order: str) -> None:
    whole = "Deploy v2.3.1 went out at 14:01 and cut the payment-db pool to 20 connections."
    part = "cut the payment-db pool to 20 connections."
    items = [_item(whole), _item(part)] if order == "whole first" else [_item(part),
                                                                        _item(whole)]
    extraction = claims_from_reply(whole, _reply(items))
    assert _texts(extraction) == [items[0]["text"]]
    assert extraction.dropped == 1


def test_extracted__headings_questions_and_lead_ins_state_nothing() -> None:
    extraction = claims_from_reply(ANSWER, _reply([
        _item("Summary"), _item("Why did this happen?"), _item("Next steps"),
        *_faithful()]))
    assert extraction.claims == split_claims(ANSWER) and extraction.dropped == 3


def test_extracted__wrong_kinds_and_flags_are_read_from_the_text() -> None:
    extraction = claims_from_reply(ANSWER, _reply([
        _item("No alerts fired for payment-db.", "ABSENCE", hedged="no", action=None),
        _item("Deploy v2.3.1 went out at 14:01.", "root cause"),
        _item("512 ERROR lines mention \"connection pool exhausted\".", "contributing-factor"),
        _item("Roll back checkout-service to v2.3.0.", 7, action="yes")]))
    by_text = {c.text: c for c in extraction.claims}
    negative = by_text["No alerts fired for payment-db."]
    assert (negative.kind, negative.hedged, negative.action) == (
        ClaimKind.NEGATIVE_OBSERVATION, False, False)
    assert by_text["Deploy v2.3.1 went out at 14:01."].kind is ClaimKind.ROOT_CAUSE
    assert by_text['512 ERROR lines mention "connection pool exhausted".'].kind \
        is ClaimKind.CONTRIBUTING_FACTOR
    action = by_text["Roll back checkout-service to v2.3.0."]
    assert (action.kind, action.action) == (ClaimKind.FINDING, True)


def test_extracted__critical_is_recomputed_not_taken_from_the_reply() -> None:
    items = [{**item, "critical": not item["critical"]} for item in _faithful()]
    extraction = claims_from_reply(ANSWER, _reply(items))
    assert [c.critical for c in extraction.claims] == [c.critical for c in split_claims(ANSWER)]
    hedged = claims_from_reply(ANSWER, _reply([
        _item(c.text, c.kind.value, hedged=c.kind is ClaimKind.ROOT_CAUSE, critical=False)
        for c in split_claims(ANSWER) if not c.action]))
    # a root cause the reply calls hedged is still checked as the root cause it states
    assert [(c.text, c.critical, c.hedged) for c in hedged.claims] == [
        (c.text, c.critical, c.hedged) for c in split_claims(ANSWER)]


def test_extracted__a_label_can_make_the_check_stricter_never_laxer() -> None:
    cause = next(c for c in split_claims(ANSWER) if c.kind is ClaimKind.ROOT_CAUSE)
    finding = next(c for c in split_claims(ANSWER) if c.kind is ClaimKind.FINDING)
    extraction = claims_from_reply(ANSWER, _reply([
        _item(cause.text, "FINDING", action=True), _item(finding.text, "ROOT_CAUSE")]))
    by_text = {c.text: c for c in extraction.claims}
    assert by_text[cause.text].kind is ClaimKind.ROOT_CAUSE and not by_text[cause.text].action
    assert by_text[finding.text].kind is ClaimKind.ROOT_CAUSE  # stricter: it is checked so


# -- replies with nothing usable: the splitter's claims, flagged -----------------------------


@pytest.mark.parametrize(("reply", "reason"), [
    ("Here are the claims: 1. checkout-service ...", "is not a list of claims"),
    ("", "is not a list of claims"),
    ('{"claims": "checkout-service has returned HTTP 500s"}', "is not a list of claims"),
    ('{"claims": []}', "lists no claim"),
    ("[]", "lists no claim"),
    (_reply([_item(INVENTED, "ROOT_CAUSE")]), "none of the 1 claims"),
    (_reply([{"claim": "checkout-service has returned HTTP 500s since 14:03 UTC."}]),
     "none of the 1 claims"),
    (_reply([_item("Roll back checkout-service to v2.3.0.", action=True)]),
     "none of the 1 claims"),
    ("[" * 100_000, "is not a list of claims"),
])
def test_extracted__an_unusable_reply_falls_back_to_the_splitter(reply: str, reason: str) -> None:
    extraction = claims_from_reply(ANSWER, reply)
    assert extraction.fallback and extraction.claims == split_claims(ANSWER)
    assert extraction.reason is not None and reason in extraction.reason
    assert extraction.note.startswith("claims split by the deterministic splitter: ")
    assert extraction.audit()["fallback"] is True


def test_extracted__a_bare_list_is_read_as_the_claims() -> None:
    extraction = claims_from_reply(ANSWER, json.dumps(_faithful()))
    assert extraction.claims == split_claims(ANSWER) and not extraction.fallback


# -- the extractor called under the retry rules ----------------------------------------------


def test_extract__a_usable_reply_is_used_once() -> None:
    model = Scripted().enqueue(_reply(_faithful()))
    log = AttemptLog("run-x")
    extraction = extract_claims(ANSWER, model, log=log)
    assert not extraction.fallback and extraction.claims == split_claims(ANSWER)
    assert model.calls == [("verity.extractor", ANSWER.encode("utf-8"))]
    assert [(a.role, a.outcome) for a in log.attempts] == [("extractor", "ok")]


def test_extract__an_unusable_reply_takes_the_technical_retry() -> None:
    model = Scripted().enqueue("not json", _reply(_faithful()))
    log = AttemptLog("run-x")
    extraction = extract_claims(ANSWER, model, log=log)
    assert not extraction.fallback
    assert [a.outcome for a in log.attempts] == ["invalid_output", "ok"]


def test_extract__two_unusable_replies_fall_back_with_the_reason() -> None:
    model = Scripted().enqueue("not json", _reply([_item(INVENTED)]))
    log = AttemptLog("run-x")
    extraction = extract_claims(ANSWER, model, log=log)
    assert extraction.fallback and extraction.claims == split_claims(ANSWER)
    assert extraction.reason is not None and "none of the 1 claims" in extraction.reason
    assert [a.outcome for a in log.attempts] == ["invalid_output", "invalid_output"]


def test_extract__a_model_that_cannot_answer_falls_back() -> None:
    down = ProviderUnavailableError("overloaded (529)")
    extraction = extract_claims(ANSWER, Scripted().enqueue(down, down), log=AttemptLog("r"))
    assert extraction.fallback and extraction.claims == split_claims(ANSWER)
    assert extraction.reason == "the extractor did not answer (overloaded (529))"


@pytest.mark.parametrize("error", [RunCancelledError("cancelled"),
                                   ConfigurationError("ANTHROPIC_API_KEY was rejected (401)")])
def test_extract__cancellation_and_a_rejected_key_propagate(error: Exception) -> None:
    with pytest.raises(type(error)):
        extract_claims(ANSWER, Scripted().enqueue(error), log=AttemptLog("r"))
