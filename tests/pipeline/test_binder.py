"""`pipeline.rules.binder`: a claim written without bindings, bound to the values that carry its
facts; every binding it writes passes the Gatekeeper."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.executor import ClaimKind
from models.invocation import ToolInvocation
from pipeline.importers.evidence import invocation_of
from pipeline.importers.record import ImportedCall
from pipeline.rules.binder import MAX_BINDINGS, bind
from pipeline.rules.facts import FactSet, extract_facts
from pipeline.rules.gatekeeper import gatekeep

LOG = "\n".join([
    "2026-11-30T14:01:55Z INFO checkout-service GET /health 200",
    "2026-11-30T14:03:12Z ERROR checkout-service payment-db connection pool exhausted (max 20)",
    "2026-11-30T14:04:22Z ERROR checkout-service POST /api/checkout 500 Internal Server Error",
])
DEPLOYS = {"deployments": [
    {"service": "checkout-service", "version": "v2.3.1", "deployed_at": "2026-11-30T14:02:11Z",
     "change": "reduce payment-db connection pool size from 50 to 20"},
    {"service": "search-api", "version": "v2.8.0", "deployed_at": "2026-11-30T13:40:00Z",
     "change": "new ranking model"},
]}
COUNTS = {"top_messages": [
    {"count": 512, "level": "ERROR", "message": "payment-db connection pool exhausted"},
    {"count": 333, "level": "ERROR", "message": "POST /api/checkout 500"},
]}


def _invocations() -> list[ToolInvocation]:
    calls = [
        ImportedCall("call_logs", "search_logs", {"service": "checkout-service"}, LOG),
        ImportedCall("call_deploys", "list_deployments", {}, DEPLOYS),
        ImportedCall("call_counts", "count_logs", {"service": "checkout-service"},
                     json.dumps(COUNTS)),
        ImportedCall("call_alerts", "list_alerts", {"service": "payment-db"}, []),
    ]
    return [invocation_of(c, max_items=1000, max_bytes=131072) for c in calls]


def _bound(claim: str, *, negative: bool = False) -> list[tuple[str, str, str]]:
    return [(b.invocation_id, b.path, b.matched_text)
            for b in bind(claim, _invocations(), negative=negative)]


def _passes_gatekeeper(claim: str, kind: ClaimKind = ClaimKind.FINDING) -> bool:
    bindings = bind(claim, _invocations(), negative=kind is ClaimKind.NEGATIVE_OBSERVATION)
    document = {"claims": [{
        "claim_id": "c1", "text": claim, "kind": kind.value, "critical": True,
        "status": "CONFIRMED", "evidence_bindings": [b.model_dump() for b in bindings]}]}
    result = gatekeep(document, _invocations()).result
    return not result.failed_rules and len(result.checked_bindings) == len(bindings)


def test_binder__a_log_line_is_bound_by_its_line() -> None:
    assert _bound("payment-db connection pool exhausted (max 20) at 14:03:12") == [
        ("call_logs", "$.lines[1]", LOG.splitlines()[1])]


def test_binder__json_objects_are_bound_whole_with_their_context() -> None:
    (binding,) = _bound("Deploy v2.3.1 reduced the payment-db pool size from 50 to 20.")
    assert binding[:2] == ("call_deploys", "$.result.deployments[0]")
    assert "v2.3.1" in binding[2] and "from 50 to 20" in binding[2]


def test_binder__each_fact_is_bound_where_it_stands() -> None:
    bound = _bound("checkout-service logged 512 pool errors after v2.3.1 went out at 14:02")
    assert {b[:2] for b in bound} == {("call_counts", "$.result.top_messages[0]"),
                                      ("call_deploys", "$.result.deployments[0]")}


def test_binder__a_changed_value_is_bound_where_the_real_value_stands() -> None:
    bound = _bound("checkout-service logged 521 pool exhausted errors")
    assert ("call_counts", "$.result.top_messages[0]") in {b[:2] for b in bound}
    evidence = FactSet.from_texts([b[2] for b in bound])
    (count,) = [f for f in extract_facts("logged 521 pool exhausted errors") if f.value]
    assert evidence.conflicts(count)


def test_binder__facts_found_nowhere_bind_nothing() -> None:
    assert _bound("The DNS resolver fleet dropped packets from dns-7.internal.") == []
    assert _bound("Restarting fixed it.") == []


def test_binder__an_invented_code_leaves_it_out_of_the_bound_text() -> None:
    bound = _bound("payment-db refused connections with ECONNREFUSED from pgbouncer-17")
    assert all("ECONNREFUSED" not in b[2] and "pgbouncer-17" not in b[2] for b in bound)


def test_binder__a_negative_observation_binds_to_a_query_that_found_nothing() -> None:
    assert _bound("No alerts fired for payment-db.", negative=True) == [
        ("call_alerts", "$.scope.service", "payment-db")]
    assert _passes_gatekeeper("No alerts fired for payment-db.",
                              ClaimKind.NEGATIVE_OBSERVATION)


def test_binder__every_binding_passes_the_gatekeeper() -> None:
    for claim in ["payment-db connection pool exhausted (max 20) at 14:03:12",
                  "Deploy v2.3.1 reduced the payment-db pool size from 50 to 20.",
                  "checkout-service logged 512 pool errors after v2.3.1 went out at 14:02",
                  "POST /api/checkout returned 500 Internal Server Error 333 times"]:
        assert _passes_gatekeeper(claim), claim


WORDS = sorted({w for line in LOG.splitlines() for w in line.split()}
               | {"v2.3.1", "v2.8.0", "512", "333", "50", "20", "search-api", "pool", "21"})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join))
def test_binder__any_claim_gets_bindings_the_gatekeeper_accepts(claim: str) -> None:
    bindings = bind(claim, _invocations())
    assert len(bindings) <= MAX_BINDINGS
    assert not bindings or _passes_gatekeeper(claim)


SEARCH_LOG = "\n".join([
    "2026-12-07T15:04:04Z INFO search-api GET /api/search?q=23e679b7 200 in 24 ms",
    "2026-12-07T15:04:57Z INFO search-api GET /api/search?q=aa3656ce 200 in 126 ms",
    "2026-12-07T15:05:12Z INFO search-api GET /api/search?q=3df2bba9 200 in 154 ms",
])


def _bound_in(claim: str, calls: list[ImportedCall]) -> list[tuple[str, str]]:
    invocations = [invocation_of(c, max_items=1000, max_bytes=131072) for c in calls]
    return [(b.invocation_id, b.path) for b in bind(claim, invocations)]


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        pytest.param("Searches took between 24 and 154 ms.",
                     {("call_search", "$.lines[0]"), ("call_search", "$.lines[2]")},
                     id="between-and-ends-two-lines"),
        pytest.param("Searches took 24–154 ms.",
                     {("call_search", "$.lines[0]"), ("call_search", "$.lines[2]")},
                     id="dash-ends-two-lines"),
    ],
)
def test_binder__each_end_of_a_range_is_bound_where_it_stands(
        claim: str, expected: set[tuple[str, str]]) -> None:
    bound = _bound_in(claim, [ImportedCall("call_search", "search_logs", {}, SEARCH_LOG)])
    assert expected <= set(bound)


@pytest.mark.parametrize(
    ("claim", "deploy_bound"),
    [
        pytest.param("The pool was cut from 50 to 20, and the first `payment-db connection "
                     "pool exhausted (max 20)` error came at 14:03:12.", True,
                     id="a-line-that-states-one-end-settles-nothing"),
        pytest.param("The pool error at 14:03:12 says max 20, and 512 errors followed.", False,
                     id="numbers-near-but-no-pair"),
    ],
)
def test_binder__a_number_is_held_back_only_by_a_value_that_states_its_pair(
        claim: str, deploy_bound: bool) -> None:
    places = {b[:2] for b in _bound(claim)}
    assert bool(places & {("call_deploys", "$.result.deployments[0]"),
                          ("call_deploys", "$.result.deployments[0].change")}) is deploy_bound


def test_binder__a_changed_pair_stays_bound_to_the_record_that_states_it() -> None:
    bound = _bound("Deploy v2.3.1 reduced the payment-db pool size from 50 to 10.")
    evidence = FactSet.from_texts([b[2] for b in bound])
    (ten,) = [f for f in extract_facts("from 50 to 10") if f.value == 10]
    assert evidence.conflicts(ten)


def test_binder__identifiers_of_one_form_are_a_list() -> None:
    log = "\n".join(["17/06/09 20:10:53 INFO Found block rdd_2_4 locally",
                     "17/06/09 20:10:54 INFO Found block rdd_2_1 locally",
                     "17/06/09 20:10:55 INFO Found block rdd_21_4 locally",
                     "17/06/09 20:10:58 INFO Found block rdd_30_0 locally"])
    bound = _bound_in("Blocks rdd_2_4, rdd_2_1 and rdd_30_0 were all found locally.",
                      [ImportedCall("call_spark", "spark_log", {}, log)])
    assert ("call_spark", "$.lines[3]") in bound and ("call_spark", "$.lines[2]") not in bound
