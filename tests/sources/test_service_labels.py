"""The service asked about, matched through the labels people use (issue 23, item 6): the
configured selector when it matches, else `service`, `job`, `app`, ... (a `-service`-like
suffix dropped when only the bare name exists), and a note when it matched nothing, naming the
services the configured label has, so an empty answer never reads as all being quiet.

The Prometheus here is a small fake answering the HTTP API's label, label values and
`query_range` endpoints over a fixed set of series, for plain `{label="value"}` selectors."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs

import httpx
import pytest

from pipeline.data.source import AlertQuery, MetricQuery
from pipeline.sources.config import PrometheusBackend
from pipeline.sources.prometheus import Prometheus

T0 = 1_767_261_600
SERIES = [
    {"__name__": "db_pool_in_use", "job": "checkout", "instance": "a:1"},
    {"__name__": "up", "job": "checkout", "instance": "a:1"},
    {"__name__": "up", "job": "node-exporter", "instance": "n:9100"},
    {"__name__": "ALERTS", "alertname": "TargetDown", "alertstate": "firing",
     "job": "node-exporter", "instance": "n:9100", "severity": "critical"},
]
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def _selects(selector: str, labels: dict[str, str]) -> bool:
    for name, op, value in _MATCHER.findall(selector):
        value = value.replace('\\"', '"').replace("\\\\", "\\")
        have = labels.get(name, "")
        flags = re.IGNORECASE if value.startswith("(?i)") else 0
        pattern = value.removeprefix("(?i)")
        ok = {"=": have == value, "!=": have != value,
              "=~": re.fullmatch(pattern, have, flags) is not None,
              "!~": re.fullmatch(pattern, have, flags) is None}[op]
        if not ok:
            return False
    return True


def _fake(asked: list[str]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        params = parse_qs(request.url.query.decode())
        path = request.url.path
        asked.append(path)
        chosen = [s for s in SERIES if all(_selects(m, s) for m in params.get("match[]", []))]
        if path == "/api/v1/labels":
            data: object = sorted({k for s in chosen for k in s})
        elif path in ("/api/v1/alerts", "/api/v1/rules"):  # no summaries
            data = {"alerts": []} if path.endswith("alerts") else {"groups": []}
        elif path.startswith("/api/v1/label/"):
            label = path.split("/")[4]
            data = sorted({s[label] for s in chosen if label in s})
        else:
            data = {"resultType": "matrix", "result": [
                {"metric": s, "values": [[T0 + 60 * i, "1"] for i in range(3)]}
                for s in SERIES if _selects(params["query"][0], s)]}
        return httpx.Response(200, json={"status": "success", "data": data})
    return httpx.MockTransport(answer)


def _backend(asked: list[str], **config: str) -> Prometheus:
    return Prometheus("test", PrometheusBackend(url="http://prom", **config),
                      transport=_fake(asked))


def _window() -> tuple[datetime, datetime]:
    start = datetime.fromtimestamp(T0, UTC)
    return start, start + timedelta(minutes=2)


def test_the_configured_selector_is_used_when_it_matches() -> None:
    asked: list[str] = []
    fetched = _backend(asked).query_metrics(MetricQuery(*_window(), service="checkout"))
    assert sorted(s.metric for s in fetched.items) == ["db_pool_in_use", "up"]
    assert fetched.note == "" and asked[0] == "/api/v1/label/__name__/values"


def test_a_target_without_the_configured_label_is_matched_by_job() -> None:
    """Convention `service`: node-exporter's series carry only `job` and `instance`."""
    asked: list[str] = []
    backend = _backend(asked, service_selector='service="{service}"', service_label="service")
    fetched = backend.query_metrics(MetricQuery(*_window(), service="node-exporter"))
    assert [(s.metric, s.service) for s in fetched.items] == [("up", "node-exporter")]
    assert fetched.note == 'node-exporter matched as job="node-exporter"'
    assert any('job="node-exporter"' in q for q in fetched.queries)


def test_a_service_suffix_the_source_does_not_use_is_dropped() -> None:
    fetched = _backend([]).query_metrics(MetricQuery(*_window(), service="checkout-service"))
    assert sorted(s.metric for s in fetched.items) == ["db_pool_in_use", "up"]
    assert fetched.note == 'checkout-service matched as job="checkout"'


def test_a_service_that_matches_nothing_says_so() -> None:
    fetched = _backend([]).query_metrics(MetricQuery(*_window(), service="billing"))
    assert list(fetched.items) == [] and fetched.total == 0
    assert fetched.note.startswith("no series matched billing through the labels job, service")
    assert fetched.note.endswith("; the job label has checkout, node-exporter")


def test_alerts_of_a_target_are_found_through_its_job() -> None:
    backend = _backend([], service_selector='service="{service}"', service_label="service")
    start, end = _window()
    fetched = backend.list_alerts(AlertQuery(start=start, end=end, service="node-exporter"))
    assert [(a.name, a.service) for a in fetched.items] == [("TargetDown", "node-exporter")]
    assert fetched.note == 'node-exporter matched as job="node-exporter"'


@pytest.mark.parametrize("service", ["checkout", "node-exporter", "billing"])
def test_every_request_is_recorded(service: str) -> None:
    asked: list[str] = []
    fetched = _backend(asked).query_metrics(MetricQuery(*_window(), service=service))
    assert len(fetched.queries) == len(asked)
