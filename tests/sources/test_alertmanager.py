"""Alertmanager backend against a real Alertmanager 0.25 holding each scenario's alerts."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from pipeline.data.records import Alert
from pipeline.data.source import AlertQuery
from pipeline.errors import SourceError
from pipeline.sources.alertmanager import Alertmanager
from pipeline.sources.config import AlertmanagerBackend
from pipeline.sources.prometheus import Prometheus
from tests.sources.prom_harness import SCENARIOS, STEP_S, PromStack

STEP = timedelta(seconds=STEP_S)


@pytest.fixture
def manager(prom_stack: PromStack) -> Any:
    opened: list[Alertmanager] = []

    def make(name: str, clock: Callable[[], datetime] | None = None,
             **overrides: Any) -> Alertmanager:
        config = prom_stack.alertmanager_config(name, **overrides)
        opened.append(Alertmanager("test", config, clock=clock))
        return opened[-1]

    yield make
    for one in opened:
        one.close()


def _key(alert: Alert) -> tuple[str, str, str, str, datetime]:
    return alert.name, alert.service, alert.severity, alert.state, alert.starts_at


@pytest.mark.parametrize("name", SCENARIOS)
def test_list_alerts__the_firing_alerts_of_the_folder(
        prom_stack: PromStack, manager: Callable[..., Alertmanager], name: str) -> None:
    scenario = prom_stack.scenarios[name]
    start = scenario.now - timedelta(hours=6)
    fetched = manager(name).list_alerts(AlertQuery(start, scenario.now))
    firing = sorted((a for a in scenario.alert_list if a.state == "firing"),
                    key=lambda a: (a.starts_at, a.name))
    assert [_key(a) for a in fetched.items] == [_key(a) for a in firing]
    assert [a.summary for a in fetched.items] == [a.summary for a in firing]
    assert fetched.queries == (
        "GET /api/v2/alerts?active=true&silenced=true&inhibited=true&unprocessed=true",)
    assert fetched.total == len(firing) and fetched.fetched_bytes > 0


def test_list_alerts__the_v2_api_drops_the_resolved_alert(
        prom_stack: PromStack, manager: Callable[..., Alertmanager]) -> None:
    """CatalogLatencyHigh was posted with its real endsAt (10:34): the API never returns it."""
    scenario = prom_stack.scenarios["checkout-pool-exhaustion"]
    assert [a.name for a in scenario.alert_list if a.state == "resolved"] == ["CatalogLatencyHigh"]
    start = datetime.fromisoformat("2026-11-30T10:00:00Z")
    backend = manager("checkout-pool-exhaustion")
    for state in ("any", "resolved"):
        fetched = backend.list_alerts(AlertQuery(start, scenario.now, state=state))  # type: ignore[arg-type]
        assert "CatalogLatencyHigh" not in [a.name for a in fetched.items]
    raw = httpx.get(f"{prom_stack.alertmanagers['checkout-pool-exhaustion'].url}/api/v2/alerts",
                    timeout=10).json()
    assert [a["labels"]["alertname"] for a in raw] == ["CheckoutHigh5xxRate"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_list_alerts__prometheus_history_plus_alertmanager_is_the_folder(
        prom_stack: PromStack, manager: Callable[..., Alertmanager], name: str) -> None:
    scenario = prom_stack.scenarios[name]
    query = AlertQuery(scenario.now - timedelta(hours=6), scenario.now)
    history = Prometheus("test", prom_stack.prometheus_config())
    try:
        from_prom = list(history.list_alerts(query).items)
    finally:
        history.close()
    from_am = list(manager(name).list_alerts(query).items)
    merged = {(a.name, a.service): a for a in from_prom}
    for alert in from_am:  # Alertmanager knows the exact start of what fires now
        merged[(alert.name, alert.service)] = alert
    want = {(a.name, a.service): a for a in scenario.alert_list}
    assert set(merged) == set(want)
    for key, alert in merged.items():
        assert (alert.severity, alert.state) == (want[key].severity, want[key].state)
        assert abs(alert.starts_at - want[key].starts_at) <= STEP
        assert alert.summary == want[key].summary


def test_list_alerts__service_filter_is_pushed_down(
        prom_stack: PromStack, manager: Callable[..., Alertmanager]) -> None:
    scenario = prom_stack.scenarios["orders-latency-payment-gateway"]
    fetched = manager("orders-latency-payment-gateway").list_alerts(
        AlertQuery(scenario.now - timedelta(hours=2), scenario.now, service="orders-api"))
    assert [a.name for a in fetched.items] == ["OrdersApiLatencyHigh"]
    assert fetched.queries[0].endswith('&filter=service="orders-api"')


def test_list_alerts__only_alerts_active_in_the_window(
        prom_stack: PromStack, manager: Callable[..., Alertmanager]) -> None:
    scenario = prom_stack.scenarios["orders-latency-payment-gateway"]
    backend = manager("orders-latency-payment-gateway")
    before = datetime.fromisoformat("2026-12-04T13:18:00Z")
    fetched = backend.list_alerts(AlertQuery(before - timedelta(hours=1), before))
    assert [a.name for a in fetched.items] == ["PaymentGatewayLatencyHigh"]
    assert backend.list_alerts(AlertQuery(scenario.now - timedelta(days=2),
                                          scenario.now - timedelta(days=1))).items == []


def test_list_alerts__ended_by_the_window_end_and_the_clock_is_resolved(
        prom_stack: PromStack, manager: Callable[..., Alertmanager]) -> None:
    """Alertmanager's endsAt is a lease a day ahead here; asked from past it, it is over."""
    later = datetime.now(UTC) + timedelta(days=30)
    backend = manager("inventory-oom-crashloop", clock=lambda: later)
    fetched = backend.list_alerts(AlertQuery(later - timedelta(days=40), later))
    (alert,) = fetched.items
    assert alert.state == "resolved" and alert.ends_at is not None
    assert alert.ends_at > datetime.now(UTC) + timedelta(hours=20)
    assert backend.list_alerts(AlertQuery(later - timedelta(days=40), later, state="firing")
                               ).items == []


def test_list_alerts__zero_end_and_summary_annotations() -> None:
    """Wire format of GET /api/v2/alerts (gettableAlerts) from Alertmanager's OpenAPI spec."""
    body = [{"labels": {"alertname": "DiskFull", "service": "db"},
             "annotations": {"description": "disk  at 99%"},
             "startsAt": "2026-01-01T10:00:00.000Z", "endsAt": "0001-01-01T00:00:00Z",
             "updatedAt": "2026-01-01T10:00:00Z", "fingerprint": "abc", "receivers": [],
             "status": {"state": "suppressed", "silencedBy": ["s1"], "inhibitedBy": []}}]
    backend = Alertmanager("test", AlertmanagerBackend(url="http://am"),
                           transport=httpx.MockTransport(lambda _: httpx.Response(200, json=body)))
    start = datetime.fromisoformat("2026-01-01T09:00:00Z")
    (alert,) = backend.list_alerts(AlertQuery(start, start + timedelta(hours=2))).items
    assert (alert.state, alert.ends_at, alert.severity, alert.summary) == (
        "firing", None, "unknown", "disk at 99%")


def test_list_alerts__a_service_name_cannot_inject_a_matcher(
        manager: Callable[..., Alertmanager]) -> None:
    backend = manager("checkout-pool-exhaustion")
    now = datetime.now(UTC)
    with pytest.raises(SourceError, match=r"^test/alertmanager cannot select service"):
        backend.list_alerts(AlertQuery(now - STEP, now, service='a",alertname=~".+'))


def test_check__version_of_the_real_server(manager: Callable[..., Alertmanager]) -> None:
    status = manager("checkout-pool-exhaustion").check()
    assert (status.reachable, status.auth_ok, status.version) == (True, True, "0.25.0")


def test_list_alerts__a_target_named_by_its_job_is_found() -> None:
    """issue 23 (6): a scrape target's alert carries `job` and `instance`, no `service` label;
    "No alerts were active for node-exporter" while TargetDown fired for it."""
    body = [{"labels": {"alertname": "TargetDown", "job": "node-exporter",
                        "instance": "n:9100", "severity": "critical"},
             "annotations": {"summary": "A scrape target is down"},
             "startsAt": "2026-01-01T10:00:00.000Z", "endsAt": "2026-01-01T12:00:00Z",
             "updatedAt": "2026-01-01T10:00:00Z", "fingerprint": "abc", "receivers": [],
             "status": {"state": "active", "silencedBy": [], "inhibitedBy": []}},
            {"labels": {"alertname": "HighErrorRate", "job": "checkout"},
             "annotations": {}, "startsAt": "2026-01-01T10:00:00.000Z",
             "endsAt": "2026-01-01T12:00:00Z", "updatedAt": "2026-01-01T10:00:00Z",
             "fingerprint": "def", "receivers": [],
             "status": {"state": "active", "silencedBy": [], "inhibitedBy": []}}]

    def answer(request: httpx.Request) -> httpx.Response:  # the filter as Alertmanager does
        wanted = dict(f.split("=", 1) for f in request.url.params.get_list("filter"))
        return httpx.Response(200, json=[a for a in body if all(
            f'"{a["labels"].get(k, "")}"' == v for k, v in wanted.items())])

    backend = Alertmanager("test", AlertmanagerBackend(url="http://am"),
                           transport=httpx.MockTransport(answer),
                           clock=lambda: datetime.fromisoformat("2026-01-01T11:00:00Z"))
    start = datetime.fromisoformat("2026-01-01T09:00:00Z")
    fetched = backend.list_alerts(AlertQuery(start, start + timedelta(hours=2),
                                             service="node-exporter"))
    assert [(a.name, a.service) for a in fetched.items] == [("TargetDown", "node-exporter")]
    assert fetched.note == 'node-exporter matched as job="node-exporter"'
    assert len(fetched.queries) == 2 and "filter" not in fetched.queries[1]
