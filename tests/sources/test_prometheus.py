"""Prometheus backend against a real Prometheus 2.42 holding the shipped scenarios' data."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from pipeline.data.records import Alert, MetricSeries
from pipeline.data.source import AlertQuery, MetricQuery
from pipeline.errors import SourceError
from pipeline.scenarios import Scenario
from pipeline.sources import prometheus as prom_module
from pipeline.sources.config import PrometheusBackend
from pipeline.sources.prometheus import Prometheus, guess_unit
from tests.sources.prom_harness import SCENARIOS, STEP_S, PromStack

STEP = timedelta(seconds=STEP_S)


@pytest.fixture
def prom(prom_stack: PromStack) -> Any:
    opened: list[Prometheus] = []

    def make(**overrides: Any) -> Prometheus:
        opened.append(Prometheus("test", prom_stack.prometheus_config(**overrides)))
        return opened[-1]

    yield make
    for one in opened:
        one.close()


def _windows(scenario: Scenario) -> dict[str, tuple[datetime, datetime]]:
    now = scenario.now
    first = min(s.times[0] for s in scenario.series)
    return {
        "tool-default": (now - timedelta(hours=2), now),
        "baseline": (now - timedelta(hours=4), now - timedelta(hours=2)),
        "whole": (first - timedelta(minutes=30), now + timedelta(minutes=30)),
        "unaligned": (now - timedelta(minutes=47, seconds=30), now - timedelta(seconds=10)),
    }


def _folder(scenario: Scenario, service: str | None, start: datetime, end: datetime,
            metric: str | None = None) -> list[MetricSeries]:
    out = []
    for one in (s for s in scenario.series if service is None or s.service == service):
        if metric and metric.lower() not in one.metric.lower():
            continue
        kept = [(t, v) for t, v in zip(one.times, one.values, strict=True) if start <= t <= end]
        if kept:
            out.append(MetricSeries(one.service, one.metric, one.unit, [t for t, _ in kept],
                                    [v for _, v in kept]))
    return sorted(out, key=lambda s: (s.service, s.metric))


def _assert_same(got: list[MetricSeries], want: list[MetricSeries]) -> None:
    assert [(s.service, s.metric, s.unit) for s in got] == \
        [(s.service, s.metric, s.unit) for s in want]
    for g, w in zip(got, want, strict=True):
        assert g.times == w.times, f"{g.service}/{g.metric}"
        assert all(math.isclose(a, b, rel_tol=0, abs_tol=1e-9)
                   for a, b in zip(g.values, w.values, strict=True)), f"{g.service}/{g.metric}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_query_metrics__every_service_and_window_equals_the_folder(
        prom_stack: PromStack, prom: Callable[..., Prometheus], name: str) -> None:
    scenario = prom_stack.scenarios[name]
    backend = prom()
    services = sorted({s.service for s in scenario.series})
    for label, (start, end) in _windows(scenario).items():
        for service in services:
            fetched = backend.query_metrics(MetricQuery(start, end, service=service))
            want = _folder(scenario, service, start, end)
            assert want, (label, service)
            _assert_same(list(fetched.items), want)
            assert fetched.total == len(want) and not fetched.truncated
            assert fetched.fetched_bytes > 0


@pytest.mark.parametrize(("name", "metric"), [
    pytest.param("checkout-pool-exhaustion", "error", id="checkout-error-all-services"),
    pytest.param("inventory-oom-crashloop", "MEMORY", id="inventory-memory-upper-case"),
    pytest.param("orders-latency-payment-gateway", "p99_ms", id="orders-latency-suffix"),
])
def test_query_metrics__name_filter_is_a_case_insensitive_substring(
        prom_stack: PromStack, prom: Callable[..., Prometheus], name: str, metric: str) -> None:
    scenario = prom_stack.scenarios[name]
    start, end = scenario.now - timedelta(hours=2), scenario.now
    fetched = prom().query_metrics(MetricQuery(start, end, metric=metric))
    want = _folder(scenario, None, start, end, metric)
    assert len({s.service for s in want}) > 1 or name == "inventory-oom-crashloop"
    _assert_same(list(fetched.items), want)


def test_query_metrics__records_the_promql_and_the_request_reruns(
        prom_stack: PromStack, prom: Callable[..., Prometheus]) -> None:
    scenario = prom_stack.scenarios["checkout-pool-exhaustion"]
    start, end = scenario.now - timedelta(hours=1), scenario.now
    fetched = prom().query_metrics(MetricQuery(start, end, service="checkout-service",
                                               metric="pool"))
    window = f"start={int(start.timestamp())}&end={int(end.timestamp())}"
    names, text = fetched.queries  # the service's metric names, then its series
    assert names == ('GET /api/v1/label/__name__/values?match[]={service="checkout-service"}'
                     f"&{window}")
    promql = ('{__name__=~"db_pool_active_connections|db_pool_max_connections",'
              'service="checkout-service"}')
    assert text == f"GET /api/v1/query_range?query={promql}&{window}&step=60"
    method, path = text.split(" ", 1)
    rerun = httpx.get(prom_stack.prometheus.url + path, timeout=10).json()
    names = sorted(r["metric"]["__name__"] for r in rerun["data"]["result"])
    assert names == [s.metric for s in fetched.items] == [
        "db_pool_active_connections", "db_pool_max_connections"]


def test_query_metrics__regex_characters_in_the_filter_are_literal(
        prom: Callable[..., Prometheus], prom_stack: PromStack) -> None:
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    backend = prom()
    assert backend.query_metrics(MetricQuery(now - STEP * 30, now, metric="http.*rate")
                                 ).items == []
    dotted = backend.query_metrics(MetricQuery(now - STEP * 30, now, metric='a"b\\c)'))
    # the filter is matched against the names the server lists: it never enters PromQL
    assert dotted.items == [] and not any('a"b' in q for q in dotted.queries)


@pytest.mark.parametrize("service", [
    pytest.param('x"} or vector(1) or {a="', id="quote-breakout"),
    pytest.param("checkout-service,job=~'.+'", id="extra-matcher"),
    pytest.param("a b", id="space"),
    pytest.param("", id="empty"),
])
def test_query_metrics__a_service_name_cannot_inject_promql(
        prom: Callable[..., Prometheus], prom_stack: PromStack, service: str) -> None:
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    with pytest.raises(SourceError, match=r"^test/prometheus cannot select service") as err:
        prom().query_metrics(MetricQuery(now - STEP, now, service=service))
    assert "\n" not in str(err.value)


def test_query_metrics__series_bound_and_total(
        prom: Callable[..., Prometheus], prom_stack: PromStack,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom_module, "MAX_SERIES", 3)
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    fetched = prom().query_metrics(MetricQuery(now - STEP * 10, now))
    assert len(fetched.items) == 3 and fetched.total == 14 and fetched.truncated


def test_query_metrics__a_long_window_gets_a_coarser_step(
        prom: Callable[..., Prometheus], prom_stack: PromStack,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom_module, "MAX_POINTS", 50)
    scenario = prom_stack.scenarios["checkout-pool-exhaustion"]
    start, end = scenario.now - timedelta(hours=6), scenario.now
    fetched = prom().query_metrics(MetricQuery(start, end, service="payment-db"))
    ranges = [q for q in fetched.queries if "/query_range?" in q]
    assert ranges and all(q.endswith("&step=480") for q in ranges)  # 361 steps > 50: 8 x 60 s
    for one in fetched.items:
        assert len(one.times) <= 50
        assert all(int(t.timestamp()) % 480 == 0 for t in one.times)


def test_query_metrics__a_window_without_a_step_asks_nothing(
        prom: Callable[..., Prometheus], prom_stack: PromStack) -> None:
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    fetched = prom().query_metrics(MetricQuery(now - timedelta(seconds=50),
                                               now - timedelta(seconds=10)))
    assert (list(fetched.items), fetched.total, fetched.queries) == ([], 0, ())


def test_query_metrics__units_guessed_without_the_config(
        prom: Callable[..., Prometheus], prom_stack: PromStack) -> None:
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    fetched = prom(units={}).query_metrics(MetricQuery(now - STEP * 5, now,
                                                       service="checkout-service"))
    assert {s.metric: s.unit for s in fetched.items} == {
        "cpu_usage_cores": "cores", "db_pool_active_connections": "",
        "db_pool_max_connections": "", "http_error_rate": "", "http_latency_p99_ms": "ms",
        "http_requests_per_second": "rps"}


@pytest.mark.parametrize(("name", "unit"), [
    ("http_request_duration_seconds", "s"), ("process_cpu_seconds_total", "s"),
    ("gc_pause_milliseconds", "ms"), ("http_latency_p99_ms", "ms"),
    ("container_memory_working_set_bytes", "bytes"), ("memory_working_set_mib", "MiB"),
    ("cache_hit_ratio", "ratio"), ("disk_used_percent", "%"), ("http_error_rate", ""),
    ("http_requests_total", "count"), ("http_request_duration_seconds_count", "count"),
    ("http_request_duration_seconds_sum", "s"), ("up", ""),
])
def test_guess_unit__by_suffix(name: str, unit: str) -> None:
    assert guess_unit(name) == unit


def test_query_metrics__a_bad_selector_is_prometheus_s_own_error(
        prom: Callable[..., Prometheus], prom_stack: PromStack) -> None:
    now = prom_stack.scenarios["checkout-pool-exhaustion"].now
    backend = prom(service_selector='service=~"({service}"')
    with pytest.raises(SourceError) as err:
        backend.query_metrics(MetricQuery(now - STEP, now, service="checkout-service"))
    message = str(err.value)
    assert message.startswith("test/prometheus answered HTTP 400: bad_data: ")
    assert "missing closing )" in message and "\n" not in message


# -- alerts ---------------------------------------------------------------------------------


def _key(alert: Alert) -> tuple[str, str, str, str]:
    return alert.name, alert.service, alert.severity, alert.state


def _active(alerts: list[Alert], start: datetime, end: datetime) -> list[Alert]:
    return sorted((a for a in alerts if a.starts_at <= end
                   and (a.ends_at is None or a.ends_at >= start)),
                  key=lambda a: (a.starts_at, a.name))


@pytest.mark.parametrize("name", SCENARIOS)
def test_list_alerts__alerts_history_equals_the_folder(
        prom_stack: PromStack, prom: Callable[..., Prometheus], name: str) -> None:
    scenario = prom_stack.scenarios[name]
    start = min(s.times[0] for s in scenario.series)
    fetched = prom().list_alerts(AlertQuery(start, scenario.now))
    want = _active(list(scenario.alert_list), start, scenario.now)
    assert [_key(a) for a in fetched.items] == [_key(a) for a in want]
    for got, expected in zip(fetched.items, want, strict=True):
        assert abs(got.starts_at - expected.starts_at) <= STEP
        if expected.ends_at is not None:
            assert got.ends_at is not None and abs(got.ends_at - expected.ends_at) <= STEP
        assert got.summary == expected.summary  # from /api/v1/rules (no rule fires now)
    assert fetched.queries[0].startswith(
        'GET /api/v1/query_range?query={__name__="ALERTS",alertstate="firing"}&')
    assert "GET /api/v1/rules?type=alert" in fetched.queries


def test_list_alerts__service_state_and_window(
        prom_stack: PromStack, prom: Callable[..., Prometheus]) -> None:
    scenario = prom_stack.scenarios["checkout-pool-exhaustion"]
    now, backend = scenario.now, prom()
    day = AlertQuery(now - timedelta(hours=6), now)
    resolved = backend.list_alerts(AlertQuery(day.start, now, state="resolved"))
    assert [(a.name, a.state) for a in resolved.items] == [("CatalogLatencyHigh", "resolved")]
    only = backend.list_alerts(AlertQuery(day.start, now, service="checkout-service"))
    assert [a.name for a in only.items] == ["CheckoutHigh5xxRate"]
    assert 'service="checkout-service"' in only.queries[0]
    # A window ending while the catalog alert fires sees it firing, clipped to the window.
    mid = backend.list_alerts(AlertQuery(datetime.fromisoformat("2026-11-30T10:25:00Z"),
                                         datetime.fromisoformat("2026-11-30T10:30:00Z")))
    assert [(a.name, a.state, a.starts_at.minute, a.ends_at) for a in mid.items] == [
        ("CatalogLatencyHigh", "firing", 25, None)]
    assert backend.list_alerts(AlertQuery(now - timedelta(hours=3), now - timedelta(hours=2))
                               ).items == []


def test_list_alerts__active_alert_summaries_come_from_api_v1_alerts() -> None:
    """Wire format of /api/v1/alerts from the Prometheus HTTP API documentation."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/api/v1/query_range":
            return httpx.Response(200, json={"status": "success", "data": {
                "resultType": "matrix", "result": [{
                    "metric": {"__name__": "ALERTS", "alertname": "HighErrors",
                               "alertstate": "firing", "job": "api", "severity": "page"},
                    "values": [[1700000000, "1"], [1700000060, "1"]]}]}})
        return httpx.Response(200, json={"status": "success", "data": {"alerts": [
            {"labels": {"alertname": "HighErrors", "job": "api", "severity": "page"},
             "annotations": {"summary": "  errors\nabove 5%  "}, "state": "firing",
             "activeAt": "2023-11-14T22:13:00Z", "value": "1e+00"}]}})

    backend = Prometheus("test", PrometheusBackend(url="http://prom"),
                         transport=httpx.MockTransport(answer))
    fetched = backend.list_alerts(AlertQuery(datetime.fromtimestamp(1699999990).astimezone(),
                                             datetime.fromtimestamp(1700000070).astimezone()))
    (alert,) = fetched.items
    assert (alert.name, alert.service, alert.severity, alert.state, alert.summary) == (
        "HighErrors", "api", "page", "firing", "errors above 5%")
    assert seen == ["/api/v1/query_range", "/api/v1/alerts"]


def test_query_metrics__same_name_series_are_told_apart_and_warnings_kept() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/label/__name__/values":
            return httpx.Response(200, json={"status": "success", "data": ["up"]})
        series = [{"metric": {"__name__": "up", "job": "api", "instance": i},
                   "values": [[1700000040, "1"], [1700000100, "NaN"], [1700000160, "+Inf"]]}
                  for i in ("b:9100", "a:9100")]
        series.append({"metric": {"__name__": "up", "job": "api", "instance": "c:9100"},
                       "values": [[1700000040, "NaN"]]})
        return httpx.Response(200, json={"status": "success", "warnings": ["partial\nanswer"],
                                         "data": {"resultType": "matrix", "result": series}})

    backend = Prometheus("test", PrometheusBackend(url="http://prom"),
                         transport=httpx.MockTransport(answer))
    fetched = backend.query_metrics(MetricQuery(datetime.fromtimestamp(1700000000).astimezone(),
                                                datetime.fromtimestamp(1700000200).astimezone(),
                                                service="api"))
    assert [(s.metric, s.values) for s in fetched.items] == [
        ('up{instance="a:9100"}', [1.0]), ('up{instance="b:9100"}', [1.0])]
    assert fetched.total == 2 and fetched.queries[1].endswith(" # warnings: partial answer")


def test_check__version_of_the_real_server(prom: Callable[..., Prometheus]) -> None:
    status = prom().check()
    assert (status.reachable, status.auth_ok, status.backend) == (True, True, "prometheus")
    assert status.version is not None and status.version.startswith("2.42")


def test_list_alerts__a_gap_splits_one_label_set_into_two_alerts() -> None:
    t0 = 1700000040

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/rules":
            return httpx.Response(200, json={"status": "success", "data": {"groups": [{
                "name": "g", "rules": [{"name": "Flapping", "type": "alerting",
                                        "annotations": {"summary": "{{ $labels.job }} flaps"}}]
            }]}})
        if request.url.path == "/api/v1/alerts":
            return httpx.Response(200, json={"status": "success", "data": {"alerts": []}})
        values = [[t0 + s, "1"] for s in (0, 60, 120, 600, 660)]
        return httpx.Response(200, json={"status": "success", "data": {
            "resultType": "matrix", "result": [{
                "metric": {"__name__": "ALERTS", "alertname": "Flapping",
                           "alertstate": "firing", "job": "api"}, "values": values}]}})

    backend = Prometheus("test", PrometheusBackend(url="http://prom"),
                         transport=httpx.MockTransport(answer))
    start = datetime.fromtimestamp(t0 - 30).astimezone()
    fetched = backend.list_alerts(AlertQuery(start, start + timedelta(seconds=720)))
    assert [(a.state, int(a.starts_at.timestamp()) - t0,
             a.ends_at and int(a.ends_at.timestamp()) - t0, a.severity, a.summary)
            for a in fetched.items] == [("resolved", 0, 120, "unknown", ""),
                                        ("firing", 600, None, "unknown", "")]
