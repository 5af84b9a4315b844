"""Faults per backend: each is a SourceError with a one-line reason, never the credential.

A local HTTP server (tests/sources/conftest.py) answers the fault named by the URL's first path
segment; the credential is a bearer token from an environment variable, and the 500 page
echoes it back, so the scrubbing is tested too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.data.source import AlertQuery, Fetched, MetricQuery
from pipeline.errors import SourceError
from pipeline.sources.alertmanager import Alertmanager
from pipeline.sources.config import AlertmanagerBackend, PrometheusBackend
from pipeline.sources.http import BackendAuthError, BackendUnreachableError
from pipeline.sources.prometheus import Prometheus
from tests.sources.fault_server import FAULT_TOKEN, FAULT_TOKEN_ENV

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
WINDOW = (NOW - timedelta(hours=1), NOW)
AUTH = {"type": "bearer", "token_env": FAULT_TOKEN_ENV}


def _prometheus(url: str) -> Prometheus:
    return Prometheus("test", PrometheusBackend.model_validate(
        {"url": url, "auth": AUTH, "timeout_s": 0.3, "max_bytes": 1024}))


def _alertmanager(url: str) -> Alertmanager:
    return Alertmanager("test", AlertmanagerBackend.model_validate(
        {"url": url, "auth": AUTH, "timeout_s": 0.3, "max_bytes": 1024}))


Call = Callable[[str], Fetched[Any]]
CALLS: dict[str, Call] = {
    "prometheus.query_metrics": lambda url: _prometheus(url).query_metrics(
        MetricQuery(*WINDOW, service="checkout-service")),
    "prometheus.list_alerts": lambda url: _prometheus(url).list_alerts(AlertQuery(*WINDOW)),
    "alertmanager.list_alerts": lambda url: _alertmanager(url).list_alerts(
        AlertQuery(*WINDOW, service="checkout-service")),
}
FAULTS = {
    "401": ("refused the credentials (HTTP 401)", BackendAuthError),
    "500": ("answered HTTP 500: internal: boom, you sent Bearer ***", SourceError),
    "sleep": ("timed out after 0.3 s", SourceError),
    "big": ("answered more than 1024 bytes (the bound)", SourceError),
    "malformed": ("answered something that is not JSON", SourceError),
    "shape": ("answered", SourceError),
}


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_TOKEN_ENV, FAULT_TOKEN)


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("call", list(CALLS))
def test_fault__one_line_reason_without_the_credential(
        fault_server: str, call: str, fault: str) -> None:
    reason, kind = FAULTS[fault]
    with pytest.raises(kind) as err:
        CALLS[call](f"{fault_server}/{fault}")
    message = str(err.value)
    assert message.startswith(f"test/{call.split('.')[0]} {reason}"), message
    assert "\n" not in message and FAULT_TOKEN not in message and len(message) <= 200


@pytest.mark.parametrize("call", list(CALLS))
def test_fault__unreachable(closed_port: int, call: str) -> None:
    with pytest.raises(BackendUnreachableError) as err:
        CALLS[call](f"http://127.0.0.1:{closed_port}")
    message = str(err.value)
    assert message.startswith(f"test/{call.split('.')[0]} unreachable: ")
    assert "\n" not in message and FAULT_TOKEN not in message


def test_fault__a_missing_token_variable_is_named_not_guessed(
        monkeypatch: pytest.MonkeyPatch, fault_server: str) -> None:
    monkeypatch.delenv(FAULT_TOKEN_ENV)
    with pytest.raises(SourceError, match=f"needs the environment variable {FAULT_TOKEN_ENV}"):
        _prometheus(fault_server)


@pytest.mark.parametrize("backend", ["prometheus", "alertmanager"])
@pytest.mark.parametrize(("where", "reachable", "auth_ok", "detail"), [
    pytest.param("/401", True, False, "refused the credentials (HTTP 401)", id="401"),
    pytest.param("/500", True, None, "answered HTTP 500", id="500"),
    pytest.param("/sleep", True, None, "timed out", id="timeout"),
    pytest.param("/shape", True, True, "", id="no-version"),
    pytest.param(None, False, None, "unreachable", id="unreachable"),
])
def test_check__faults(fault_server: str, closed_port: int, backend: str, where: str | None,
                       reachable: bool, auth_ok: bool | None, detail: str) -> None:
    url = f"{fault_server}{where}" if where else f"http://127.0.0.1:{closed_port}"
    source = _prometheus(url) if backend == "prometheus" else _alertmanager(url)
    status = source.check()
    assert (status.backend, status.reachable, status.auth_ok) == (backend, reachable, auth_ok)
    assert detail in status.detail and FAULT_TOKEN not in status.detail
    assert status.version is None
