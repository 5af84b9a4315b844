"""A label set's service by the labels people use (pipeline/sources/labels.py), and the
backends naming an alert's target by them instead of "unknown" (issue 23, item 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from pipeline.data.source import AlertQuery
from pipeline.sources.alertmanager import Alertmanager
from pipeline.sources.config import AlertmanagerBackend, PrometheusBackend
from pipeline.sources.labels import target_name
from pipeline.sources.prometheus import Prometheus


@pytest.mark.parametrize(("labels", "service_label", "expected"), [
    pytest.param({"service": "checkout", "job": "web"}, "service", "checkout",
                 id="the configured label first"),
    pytest.param({"job": "node-exporter", "instance": "h:9100"}, "service", "node-exporter",
                 id="issue23: node-exporter has only job and instance"),
    pytest.param({"app.kubernetes.io/name": "cart", "job": "kubernetes-pods"}, "service",
                 "cart", id="kubernetes recommended label before the scrape job"),
    pytest.param({"app": "cart", "job": "kubernetes-pods"}, "job", "kubernetes-pods",
                 id="a configured label wins over the conventions"),
    pytest.param({"instance": "h:9100"}, "service", 'instance="h:9100"',
                 id="only an instance: named by it"),
    pytest.param({"alertname": "Watchdog"}, "service", None, id="nothing names a target"),
    pytest.param({"service": "", "job": "api"}, "service", "api", id="an empty label is absent"),
])
def test_target_name(labels: dict[str, str], service_label: str, expected: str | None) -> None:
    assert target_name(labels, service_label) == expected


def test_alertmanager__an_alert_without_the_service_label_is_named_by_its_job() -> None:
    body = [{"labels": {"alertname": "TargetDown", "job": "node-exporter",
                        "instance": "127.0.0.1:9100", "severity": "critical"},
             "annotations": {}, "startsAt": "2026-01-01T10:00:00Z",
             "endsAt": "2026-01-01T12:00:00Z"}]
    backend = Alertmanager("test", AlertmanagerBackend(url="http://am"),
                           transport=httpx.MockTransport(lambda _: httpx.Response(200, json=body)),
                           clock=lambda: datetime(2026, 1, 1, 10, 30, tzinfo=UTC))
    start = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    (alert,) = backend.list_alerts(AlertQuery(start, start + timedelta(hours=2))).items
    assert alert.service == "node-exporter"


def test_prometheus__an_alerts_series_without_the_service_label_is_named_by_its_job() -> None:
    t0 = 1_767_261_600

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/api/v1/query_range":
            return httpx.Response(200, json={"status": "success", "data": {"groups": []}})
        return httpx.Response(200, json={"status": "success", "data": {
            "resultType": "matrix", "result": [{
                "metric": {"__name__": "ALERTS", "alertname": "TargetDown",
                           "alertstate": "firing", "job": "node-exporter",
                           "instance": "h:9100"},
                "values": [[t0, "1"], [t0 + 60, "1"]]}]}})

    config = PrometheusBackend(url="http://prom", service_label="service",
                               service_selector='service="{service}"')
    backend = Prometheus("test", config, transport=httpx.MockTransport(answer))
    start = datetime.fromtimestamp(t0 - 60, UTC)
    (alert,) = backend.list_alerts(AlertQuery(start, start + timedelta(seconds=600))).items
    assert alert.service == "node-exporter"
