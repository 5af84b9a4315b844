"""`pipeline.rules.prose`: an answer split into claims, each with its span, kind and weight."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.executor import ClaimKind
from pipeline.rules.prose import plain_text, split_claims

MARKDOWN = """## Summary
checkout-service has been returning HTTP 500s since 14:03 UTC. Here is what I found:

- 512 ERROR lines from checkout-service mention "connection pool exhausted".
- Deploy v2.3.1 went out at 14:01, e.g. two minutes before the onset.
  It changed the payment-db pool.
- No alerts fired for payment-db.

**Root cause:** the v2.3.1 deploy cut the payment-db pool from 50 to 20 connections.

| service | status | errors |
|---|---|---|
| checkout-service | degraded | 512 |

```
kubectl rollout undo deploy/checkout-service
```

## Next steps
1. Roll back checkout-service to v2.3.0.
2. Watch the pool metrics.

It may also be that redis is slow. Why did this happen?
"""


def _texts(answer: str) -> list[str]:
    return [c.text for c in split_claims(answer)]


def test_prose__sentences_items_and_rows_are_claims_with_exact_spans() -> None:
    claims = split_claims(MARKDOWN)
    assert [c.text for c in claims] == [
        "checkout-service has been returning HTTP 500s since 14:03 UTC.",
        '512 ERROR lines from checkout-service mention "connection pool exhausted".',
        "Deploy v2.3.1 went out at 14:01, e.g. two minutes before the onset.\n"
        "  It changed the payment-db pool.",
        "No alerts fired for payment-db.",
        "**Root cause:** the v2.3.1 deploy cut the payment-db pool from 50 to 20 connections.",
        "checkout-service | degraded | 512",
        "Roll back checkout-service to v2.3.0.",
        "Watch the pool metrics.",
        "It may also be that redis is slow.",
    ]
    for claim in claims:
        assert MARKDOWN[claim.start:claim.end] == claim.text


def test_prose__kind_weight_and_actions_come_from_the_wording() -> None:
    by_text = {c.text[:24]: c for c in split_claims(MARKDOWN)}
    cause = by_text["**Root cause:** the v2.3"]
    assert cause.kind is ClaimKind.ROOT_CAUSE and cause.critical
    assert cause.plain.startswith("Root cause: the v2.3.1 deploy")
    deploy = by_text["Deploy v2.3.1 went out a"]
    assert deploy.kind is ClaimKind.FINDING and deploy.critical  # shares v2.3.1 with the cause
    assert not by_text["checkout-service has bee"].critical
    assert by_text["No alerts fired for paym"].kind is ClaimKind.NEGATIVE_OBSERVATION
    assert by_text["Roll back checkout-servi"].action
    assert by_text["Watch the pool metrics."].action
    maybe = by_text["It may also be that redi"]
    assert maybe.hedged and not maybe.action and not maybe.critical


@pytest.mark.parametrize(("sentence", "kind"), [
    ("The root cause is the v2.3.1 deploy.", ClaimKind.ROOT_CAUSE),
    ("checkout-service fails because payment-db refuses connections.", ClaimKind.ROOT_CAUSE),
    ("The error burst coincides with the v2.3.1 deploy at 14:02.", ClaimKind.CORRELATION),
    ("Retries from orders-api made the load on payment-gateway worse.",
     ClaimKind.CONTRIBUTING_FACTOR),
    ("billing-service logged no errors between 08:00 and 10:00.",
     ClaimKind.NEGATIVE_OBSERVATION),
    ("There were no deployments of billing-service this morning.",
     ClaimKind.NEGATIVE_OBSERVATION),
    ("No root cause could be determined from these logs.", ClaimKind.NEGATIVE_OBSERVATION),
    ("payment-db reported 20 active connections at 14:05.", ClaimKind.FINDING),
])
def test_prose__kind_of_one_sentence(sentence: str, kind: ClaimKind) -> None:
    (claim,) = split_claims(sentence)
    assert claim.kind is kind


def test_prose__without_a_root_cause_the_unhedged_findings_are_critical() -> None:
    claims = split_claims("billing-service logged no errors this morning. Its error rate stayed "
                          "at 0.1%. It might be worth checking the new alert rules.")
    assert [c.critical for c in claims] == [True, True, False]


def test_prose__lead_ins_questions_headings_and_code_are_not_claims() -> None:
    assert _texts("# Incident report\nHere is what I found:\n\nWhat happened?\n"
                  "```\nkubectl get pods\n```\n") == []


def test_prose__abbreviations_and_versions_do_not_end_a_sentence() -> None:
    assert _texts("Pods were restarted approx. 40 times, i.e. Every 5 minutes. v5.1.0 set "
                  "512Mi. Done.") == [
        "Pods were restarted approx. 40 times, i.e. Every 5 minutes.",
        "v5.1.0 set 512Mi.",
    ]


def test_prose__one_statement_a_line_when_lines_end_without_punctuation() -> None:
    assert _texts("Root cause: deploy v2.3.1 of checkout-service\n"
                  "Impact: 512 failed checkouts\n") == [
        "Root cause: deploy v2.3.1 of checkout-service", "Impact: 512 failed checkouts"]


def test_prose__a_hard_wrapped_sentence_stays_one() -> None:
    assert _texts("Since 14:05\nUTC the logs show pool exhausted on POST\n/api/checkout.") == [
        "Since 14:05\nUTC the logs show pool exhausted on POST\n/api/checkout."]


def test_prose__setext_headings_and_quotes() -> None:
    claims = split_claims("Summary\n=======\n> payment-db ran out of connections at 14:03.\n"
                          "Impact\n------\nAround 4% of checkouts failed.\n")
    assert [(c.section, c.text) for c in claims] == [
        ("Summary", "payment-db ran out of connections at 14:03."),
        ("Impact", "Around 4% of checkouts failed."),
    ]


def test_prose__plain_text_drops_markdown() -> None:
    assert plain_text("**Root cause:** `v2.3.1` cut the [pool](http://x/y) to _20_") == (
        "Root cause: v2.3.1 cut the pool to 20")
    assert plain_text("checkout-service | degraded | 512") == "checkout-service ; degraded ; 512"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab1.2 -*|#>`\n:?!vV") + ["14:03", "v2.3.1", "no ",
                                                                 "because ", "e.g. ", "```"]),
                max_size=80).map("".join))
def test_prose__any_text_splits_into_exact_spans(answer: str) -> None:
    previous = 0
    for claim in split_claims(answer):
        assert answer[claim.start:claim.end] == claim.text
        assert claim.start >= previous
        previous = claim.end
