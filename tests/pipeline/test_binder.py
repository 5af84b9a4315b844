"""`pipeline.rules.binder`: a claim written without bindings, bound to the values that carry its
facts; every binding it writes passes the Gatekeeper."""

from __future__ import annotations

import json

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
