"""Counters are rates (issue 23, item 4): a cumulative series' level is never handed on as a
level. `pipeline/sources/counters.py` says which names are cumulative and the PromQL that
reads them; the Prometheus backend runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import httpx
import pytest

from pipeline.data.source import MetricQuery
from pipeline.sources.config import PrometheusBackend
from pipeline.sources.counters import derived, kind_of, rate_window_s
from pipeline.sources.prometheus import Prometheus


@pytest.mark.parametrize(("name", "kind"), [
    ("http_requests_total", "counter"),
    ("http_request_duration_seconds_count", "counter"),
    ("http_request_duration_seconds_sum", "counter"),
    ("http_request_duration_seconds_bucket", "bucket"),
    ("http_requests_created", "created"),
    ("db_pool_in_use", "gauge"),
    ("http_error_rate", "gauge"),
    ("up", "gauge"),
])
def test_kind_of(name: str, kind: str) -> None:
    assert kind_of(name) == kind


@pytest.mark.parametrize(("step", "window"), [(1, 15), (5, 20), (60, 240)])
def test_rate_window_is_four_steps_at_least_15s(step: int, window: int) -> None:
    assert rate_window_s(step) == window


@pytest.mark.parametrize(("name", "unit", "promql", "metric", "shown_unit"), [
    ("http_requests_total", "count",
     'rate({__name__="http_requests_total",job="checkout"}[20s])',
     "rate(http_requests_total[20s])", "/s"),
    ("http_request_duration_seconds_sum", "s",
     'rate({__name__="http_request_duration_seconds_sum",job="checkout"}[20s])',
     "rate(http_request_duration_seconds_sum[20s])", "s/s"),
    ("http_request_duration_seconds_bucket", "s",
     'histogram_quantile(0.95, rate({__name__="http_request_duration_seconds_bucket",'
     'job="checkout"}[20s]))',
     "histogram_quantile(0.95, rate(http_request_duration_seconds_bucket[20s]))", "s"),
])
def test_derived(name: str, unit: str, promql: str, metric: str, shown_unit: str) -> None:
    query = derived(name, 'job="checkout"', 20, base_unit=unit)
    assert (query.promql, query.metric, query.unit) == (promql, metric, shown_unit)


def test_derived__without_a_service_selects_by_name_only() -> None:
    assert derived("x_total", "", 15).promql == 'rate({__name__="x_total"}[15s])'


T0 = 1_767_261_600
NAMES = ["db_pool_in_use", "http_request_duration_seconds_bucket",
         "http_request_duration_seconds_sum", "http_requests_created", "http_requests_total"]


def _matrix(*series: tuple[dict[str, str], list[float]]) -> httpx.Response:
    return httpx.Response(200, json={"status": "success", "data": {
        "resultType": "matrix", "result": [
            {"metric": labels, "values": [[T0 + 5 * i, repr(v)] for i, v in enumerate(values)]}
            for labels, values in series]}})


def test_prometheus__counters_come_back_as_rates_and_buckets_as_a_quantile() -> None:
    """issue23: `..._seconds_sum` peaking at 2261 s read like a latency; counters compared as
    levels made up an incident. The raw counter levels never come back."""
    asked: list[str] = []
    job = {"job": "checkout", "instance": "h:1"}

    def answer(request: httpx.Request) -> httpx.Response:
        params = parse_qs(request.url.query.decode())
        if request.url.path.startswith("/api/v1/label"):  # names, labels, names with a code
            asked.append(request.url.path)
            coded = "code" in params["match[]"][0]
            return httpx.Response(200, json={"status": "success", "data": (
                ["job", "instance", "code", "le"] if request.url.path == "/api/v1/labels"
                else ["http_requests_total"] if coded else NAMES)})
        query = params["query"][0]
        asked.append(query)
        if query.startswith("(sum by"):  # the error ratio
            return _matrix(({"job": "checkout"}, [0.0, 0.47]))
        if query.startswith("rate(") and "http_requests_total" in query:
            return _matrix(({**job, "code": "200"}, [20.0, 20.0]),
                           ({**job, "code": "500"}, [0.0, 18.0]))
        if query.startswith("histogram_quantile("):
            return _matrix((job, [0.05, 0.49]))
        if query.startswith("rate("):
            return _matrix((job, [1.0, 9.0]))
        return _matrix(
            ({"__name__": "http_requests_total", "code": "200", **job}, [100.0, 200.0]),
            ({"__name__": "http_requests_total", "code": "500", **job}, [0.0, 90.0]),
            ({"__name__": "http_request_duration_seconds_sum", **job}, [2000.0, 2261.0]),
            ({"__name__": "http_request_duration_seconds_bucket", "le": "0.1", **job},
             [100.0, 110.0]),
            ({"__name__": "http_requests_created", **job}, [T0, T0]),
            ({"__name__": "db_pool_in_use", **job}, [3.0, 20.0]))

    config = PrometheusBackend(url="http://prom", step_s=5)
    backend = Prometheus("test", config, transport=httpx.MockTransport(answer))
    start = datetime.fromtimestamp(T0, UTC)
    fetched = backend.query_metrics(MetricQuery(start, start + timedelta(seconds=5),
                                                service="checkout"))
    shown = {(s.metric, s.unit): s.values for s in fetched.items}
    assert shown == {
        ("db_pool_in_use", ""): [3.0, 20.0],
        ('rate(http_requests_total{code=~"5.."}[20s]) / rate(http_requests_total[20s])',
         "ratio"): [0.0, 0.47],
        ('rate(http_requests_total[20s]){code="200"}', "/s"): [20.0, 20.0],
        ('rate(http_requests_total[20s]){code="500"}', "/s"): [0.0, 18.0],
        ("rate(http_request_duration_seconds_sum[20s])", "s/s"): [1.0, 9.0],
        ("histogram_quantile(0.95, rate(http_request_duration_seconds_bucket[20s]))", "s"):
            [0.05, 0.49],
    }
    # names, labels, names with a status code; the gauges, the error ratio, three rates
    assert len(asked) == 8 and len(fetched.queries) == 8
    assert not any("http_requests_created" in q for q in asked)
    assert all(s.service == "checkout" for s in fetched.items)
