"""Each built-in tool on real scenario data: what it finds, its scope, its bounds.

Counts are checked against the scenario data counted independently here, so a tool that
filtered wrongly would fail.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

from models.invocation import EvidenceStatus, LifecycleStatus
from pipeline.data.records import iso
from pipeline.data.runbooks import tokenize
from pipeline.rules.jsonpath import resolve

CHECKOUT = "checkout-pool-exhaustion"
INVENTORY = "inventory-oom-crashloop"
ORDERS = "orders-latency-payment-gateway"
BILLING = "billing-no-evidence"
SETTLEMENT = "settlement-tls-expiry"


def _found(invocation: Any) -> None:
    assert invocation.status is LifecycleStatus.READY, invocation.error
    assert invocation.evidence_status is EvidenceStatus.EVIDENCE_FOUND


def _empty(invocation: Any) -> None:
    assert invocation.status is LifecycleStatus.READY, invocation.error
    assert invocation.evidence_status is EvidenceStatus.NO_EVIDENCE


# ---- search_logs -------------------------------------------------------------------------

def test_search_logs__counts_match_the_data_and_the_scope_is_recorded(
    call: Any, doc: Any, scenario: Any
) -> None:
    data = scenario(CHECKOUT)
    start, end = data.now - timedelta(hours=2), data.now
    expected = [e for e in data.logs if e.service == "checkout-service"
                and e.level in ("ERROR", "FATAL") and start <= e.at <= end]
    invocation = call(CHECKOUT, "search_logs", service="checkout-service", level="ERROR")
    _found(invocation)
    result = doc(invocation)
    assert result["total"] == len(expected) > 500
    assert result["by_level"] == {"ERROR": len(expected)}
    assert result["scope"] == {
        "service": "checkout-service",
        "window": {"start": iso(start), "end": iso(end)},
        "filter": "level >= ERROR",
    }
    hits = result["hits"]
    assert len(hits) == 20 and [h["ts"] for h in hits] == sorted(h["ts"] for h in hits)
    assert hits[0]["ts"] == expected[0].ts and hits[0]["message"] == expected[0].message


def test_search_logs__top_pattern_is_the_burst_with_its_earlier_count(
    call: Any, doc: Any
) -> None:
    result = doc(call(CHECKOUT, "search_logs", service="checkout-service", level="ERROR"))
    top = result["top_messages"][0]
    assert top["example"].startswith("payment-db connection pool exhausted (max 20)")
    assert top["previous_count"] == 0 and top["count"] > 400
    assert top["first_ts"] == "2026-11-30T14:03:12Z"
    assert top["summary"] == (
        f"{top['count']} ERROR lines from checkout-service between 2026-11-30T14:03:12Z and "
        f"{top['last_ts']} (0 in the preceding 120 minutes): {top['example']}"
    )
    # ids and numbers are templated, so the 500s with different request ids are one pattern
    patterns = [m["pattern"] for m in result["top_messages"]]
    assert "POST /api/checkout <n> Internal Server Error (request_id=req-<id>)" in patterns
    assert len(patterns) == len(set(patterns))


def test_search_logs__query_words_must_all_occur(call: Any, doc: Any) -> None:
    result = doc(call(ORDERS, "search_logs", service="orders-api",
                      query="PAYMENT-gateway retrying"))
    assert result["total"] > 100
    assert all("retrying" in h["message"] for h in result["hits"])
    assert result["scope"]["filter"] == 'message contains "PAYMENT-gateway retrying"'


def test_search_logs__no_match_is_ready_with_no_evidence(call: Any, doc: Any) -> None:
    invocation = call(BILLING, "search_logs", service="billing-service", level="ERROR")
    _empty(invocation)
    result = doc(invocation)
    assert result["total"] == 0 and result["hits"] == [] and result["top_messages"] == []
    assert result["scope"]["service"] == "billing-service"


def test_search_logs__an_unknown_service_has_no_evidence(call: Any) -> None:
    _empty(call(BILLING, "search_logs", service="no-such-service"))


def test_search_logs__explicit_window_and_all_services(call: Any, doc: Any) -> None:
    window = {"start": "2026-12-03T09:00:00Z", "end": "2026-12-03T09:10:00Z"}
    result = doc(call(SETTLEMENT, "search_logs", level="error", window=window))
    assert result["scope"]["window"] == window and result["scope"]["service"] is None
    assert {m["service"] for m in result["top_messages"]} >= {"settlement-service",
                                                              "reporting-service"}
    assert all("2026-12-03T09:00:00Z" <= h["ts"] <= "2026-12-03T09:10:00Z"
               for h in result["hits"])


def test_search_logs__items_beyond_the_bound_are_cut_and_marked(call: Any, doc: Any) -> None:
    invocation = call(CHECKOUT, "search_logs", service="checkout-service", limit=200,
                      max_items=5)
    result = doc(invocation)
    assert result["truncated"] is True
    assert len(result["hits"]) == 5 and len(result["top_messages"]) == 5
    assert result["total"] > 1000  # the count still covers every match
    assert resolve(result, "$.hits[4].message")


def test_search_logs__bytes_beyond_the_bound_are_cut_and_marked(call: Any) -> None:
    invocation = call(CHECKOUT, "search_logs", service="checkout-service", limit=200,
                      max_bytes=4000)
    assert invocation.projection is not None and invocation.projection.truncated is True
    assert len(invocation.projection.model_dump_json()) <= 4000


# ---- query_metrics -----------------------------------------------------------------------

def test_query_metrics__shift_against_the_baseline_in_numbers_and_words(
    call: Any, doc: Any
) -> None:
    invocation = call(CHECKOUT, "query_metrics", service="checkout-service", metric="error")
    _found(invocation)
    result = doc(invocation)
    [series] = result["series"]
    assert series["metric"] == "http_error_rate" and series["unit"] == "%"
    assert series["shift"] == "up"
    assert "2026-11-30T14:02:11Z" < series["onset"] <= "2026-11-30T14:06:00Z"
    assert series["baseline"]["mean"] < 0.5 < 30 < series["peak"]
    assert series["baseline"]["start"] == "2026-11-30T11:00:00Z"
    assert series["baseline"]["end"] == "2026-11-30T13:00:00Z"
    summary = series["summary"]
    assert summary.startswith("http_error_rate of checkout-service: baseline mean ")
    assert f"peak {series['peak']:g}% at {series['peak_at']}" in summary
    assert f"shifted up from baseline at {series['onset']}" in summary
    assert 1 <= len(series["points"]) <= 12
    assert result["scope"]["filter"] == 'metric contains "error"'


def test_query_metrics__a_healthy_service_does_not_shift(call: Any, doc: Any) -> None:
    result = doc(call(BILLING, "query_metrics", service="billing-service"))
    assert len(result["series"]) == 4
    assert {s["shift"] for s in result["series"]} == {"none"}
    assert result["summary"].endswith("none shifted from baseline")


def test_query_metrics__a_drop_is_a_down_shift(call: Any, doc: Any) -> None:
    result = doc(call(SETTLEMENT, "query_metrics", service="ledger-api",
                      metric="requests_per_second"))
    [series] = result["series"]
    assert series["shift"] == "down" and series["onset"] == "2026-12-03T09:00:00Z"
    assert f"low {series['low']:g} rps" in series["summary"]


def test_query_metrics__an_unmatched_metric_has_no_evidence(call: Any) -> None:
    _empty(call(CHECKOUT, "query_metrics", service="checkout-service", metric="nonexistent"))


def test_query_metrics__explicit_baseline(call: Any, doc: Any) -> None:
    result = doc(call(CHECKOUT, "query_metrics", service="checkout-service", metric="error",
                      baseline={"start": "2026-11-30T09:00:00Z", "end": "2026-11-30T10:00:00Z"}))
    assert result["series"][0]["baseline"]["start"] == "2026-11-30T09:00:00Z"


def test_query_metrics__without_history_before_the_window_its_first_points_stand_in(
        call: Any, doc: Any) -> None:
    """issue 23 (5): with less history than the baseline window every series was "shift
    unknown without baseline" and dropped; now the window's first quarter stands in, and
    the summary says so."""
    window = {"start": "2026-11-30T08:00:00Z", "end": "2026-11-30T15:00:00Z"}
    result = doc(call(CHECKOUT, "query_metrics", service="checkout-service", metric="error",
                      window=window))
    [series] = result["series"]
    assert series["baseline_in_window"] is True and series["shift"] == "up"
    assert series["baseline"]["start"] == "2026-11-30T09:00:00Z"
    assert series["baseline"]["end"] < "2026-11-30T14:00:00Z" < series["onset"]
    assert "(its first points: no data before the window)" in series["summary"]
    explicit = doc(call(CHECKOUT, "query_metrics", service="checkout-service", metric="error",
                        window=window, baseline={"start": "2026-11-29T09:00:00Z",
                                                 "end": "2026-11-29T10:00:00Z"}))
    assert explicit["series"][0]["shift"] == "unknown"  # an explicit baseline is kept


# ---- alerts, deployments, events ---------------------------------------------------------

def test_list_alerts__active_in_the_window_with_summaries(call: Any, doc: Any) -> None:
    result = doc(call(SETTLEMENT, "list_alerts", service="ledger-api"))
    names = [a["name"] for a in result["alerts"]]
    assert names == ["CertificateExpiringSoon", "CertificateExpired"]  # the first resolved
    assert result["firing"] == 1
    assert result["alerts"][1]["summary"] == (
        "CertificateExpired (critical) for ledger-api, firing since 2026-12-03T09:01:00Z: "
        "certificate ledger-api-tls has expired")


def test_list_alerts__state_filter_and_no_evidence(call: Any, doc: Any) -> None:
    firing = doc(call(SETTLEMENT, "list_alerts", service="ledger-api", state="firing"))
    assert [a["name"] for a in firing["alerts"]] == ["CertificateExpired"]
    assert firing["scope"]["filter"] == "state = firing"
    _empty(call(BILLING, "list_alerts", service="billing-service"))


def test_list_deployments__in_the_window_only(call: Any, doc: Any) -> None:
    narrow = doc(call(CHECKOUT, "list_deployments"))
    assert [d["version"] for d in narrow["deployments"]] == ["v2.3.1"]
    wide = doc(call(CHECKOUT, "list_deployments", lookback_minutes=360))
    assert [d["version"] for d in wide["deployments"]] == ["v1.14.2", "v2.3.1"]
    assert wide["deployments"][1]["summary"] == (
        "checkout-service v2.3.1 deployed at 2026-11-30T14:02:11Z (previous v2.3.0) by maria.k: "
        "reduce payment-db connection pool size from 50 to 20")
    assert wide["scope"]["filter"] == "all services"
    _empty(call(BILLING, "list_deployments", service="billing-service", lookback_minutes=240))


def test_get_events__reasons_counted_from_the_data(call: Any, doc: Any, scenario: Any) -> None:
    data = scenario(INVENTORY)
    start = data.now - timedelta(hours=2)
    kills = [e for e in data.event_list if e.reason == "OOMKilled" and e.ts >= start]
    result = doc(call(INVENTORY, "get_events", service="inventory-service", type="Warning"))
    reasons = {r["reason"]: r for r in result["reasons"]}
    assert set(reasons) == {"OOMKilled", "BackOff"}
    assert reasons["OOMKilled"]["events"] == len(kills) > 10
    assert len(reasons["OOMKilled"]["objects"]) == 3
    assert all(e["type"] == "Warning" for e in result["events"])


def test_get_events__reason_filter_and_object_prefix(call: Any, doc: Any) -> None:
    result = doc(call(SETTLEMENT, "get_events", service="ledger-api", reason="expired"))
    assert [e["object"] for e in result["events"]] == ["ledger-api-tls"]
    assert result["scope"]["filter"] == "reason = expired"
    _empty(call(SETTLEMENT, "get_events", service="ledger-ap", reason="Expired"))  # not a prefix


def test_get_events__many_events_are_cut_and_marked(call: Any, doc: Any) -> None:
    result = doc(call(INVENTORY, "get_events", service="inventory-service", max_items=10))
    assert result["truncated"] is True and len(result["events"]) == 10
    assert result["total_items"] > 10


# ---- search_runbooks ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("How do I rotate the payment-db credentials?",
                     "rb-payment-db-credential-rotation", id="credentials"),
        pytest.param("payment-db primary down, fail over to the standby",
                     "rb-payment-db-failover", id="failover"),
        pytest.param("connection pool exhausted timed out waiting for a connection",
                     "rb-db-connection-pool-exhaustion", id="pool"),
        pytest.param("pods OOMKilled and restarting in CrashLoopBackOff",
                     "rb-oomkilled-crashloop", id="oom"),
        pytest.param("x509: certificate has expired or is not yet valid",
                     "rb-tls-certificate-renewal", id="tls"),
        pytest.param("how to roll back a bad release", "rb-deploy-rollback", id="rollback"),
    ],
)
def test_search_runbooks__bm25_ranks_the_right_runbook_first(
    call: Any, doc: Any, query: str, expected: str
) -> None:
    invocation = call(CHECKOUT, "search_runbooks", query=query)
    _found(invocation)
    documents = doc(invocation)["documents"]
    assert documents[0]["doc_id"] == expected
    assert documents[0]["score"] > documents[1]["score"]
    assert documents[0]["excerpt"] and documents[0]["title"]


def test_search_runbooks__scores_are_okapi_bm25(call: Any, doc: Any, scenario: Any) -> None:
    runbooks = scenario(CHECKOUT).runbooks
    corpus = [tokenize(f"{r.title} {r.title} {' '.join(r.tags)} {r.text}") for r in runbooks]
    query = "rotate payment-db credentials"
    scores = BM25Okapi(corpus).get_scores(tokenize(query))
    expected = {r.doc_id: round(float(s), 3) for r, s in zip(runbooks, scores, strict=True)}
    documents = doc(call(CHECKOUT, "search_runbooks", query=query, limit=20))["documents"]
    assert {d["doc_id"]: d["score"] for d in documents} == {
        k: v for k, v in expected.items() if k in {d["doc_id"] for d in documents}}
    assert [d["score"] for d in documents] == sorted((d["score"] for d in documents),
                                                     reverse=True)


def test_search_runbooks__steps_are_returned(call: Any, doc: Any) -> None:
    [best] = doc(call(CHECKOUT, "search_runbooks", query="rotate payment-db credentials",
                      limit=1))["documents"]
    assert len(best["steps"]) == 7
    assert best["steps"][0].startswith("Open a change ticket")


def test_search_runbooks__nothing_shared_is_no_evidence(call: Any, doc: Any) -> None:
    invocation = call(CHECKOUT, "search_runbooks", query="zebra quokka")
    _empty(invocation)
    assert doc(invocation)["scope"]["filter"] == "zebra quokka"
