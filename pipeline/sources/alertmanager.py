"""Alertmanager: the alerts it holds now, through its v2 API.

    am = Alertmanager("prod", config)
    am.list_alerts(AlertQuery(start, end, service="checkout"))
    #   GET /api/v2/alerts?active=true&silenced=true&inhibited=true&unprocessed=true
    #       &filter=service="checkout"

Every alert Alertmanager holds is asked for, silenced, inhibited and not yet processed ones
included (a silenced alert still fired), narrowed by a `filter` label matcher on
`service_label` when the query names a service. When no alert carries that label for the
service (a scrape target's alerts have only `job` and `instance`), every alert is asked for
once more and those naming the service in another of the labels people use
(`pipeline.sources.labels.SERVICE_LABELS`) are kept, which the answer's `note` says. Each
becomes one `Alert`: name the `alertname` label, service the `service_label` label (else the
queried service, else the target its labels name: `job`, `app` ..., `pipeline.sources.labels`),
severity the `severity` label, summary the first of `summary_annotations` that is set. It
is `resolved` (at `endsAt`) when `endsAt` lies at or before both the window's end and the time
of the call, else `firing`. Only alerts active at some time in the window are kept, by start
then name, at most `MAX_ALERTS`.

The v2 API drops resolved alerts: `GET /api/v2/alerts` leaves out every alert whose `endsAt`
has passed, even while Alertmanager still holds it, so this backend only ever sees what fires
at the time of the call (every alert it returns is `firing`). The answer says so: its
`as_of` is the time of the call, and the tool's scope is that moment, not the window asked.
The history of resolved alerts comes from Prometheus's `ALERTS` series
(`pipeline.sources.prometheus`), which a source with both backends reads for the window
(`pipeline.sources.composite`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import AwareDatetime, BaseModel, ConfigDict, ValidationError

from pipeline.data.records import Alert
from pipeline.data.source import AlertQuery, BackendStatus, Fetched
from pipeline.sources.config import AlertmanagerBackend
from pipeline.sources.http import BackendClient
from pipeline.sources.labels import SERVICE_LABELS, target_name
from pipeline.sources.prometheus import SERVICE_NAME

MAX_ALERTS = 500
"""Alerts returned per query; `total` says how many were active in the window."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _GettableAlert(_Wire):
    labels: dict[str, str]
    annotations: dict[str, str] = {}
    startsAt: AwareDatetime  # noqa: N815 - the wire's name
    endsAt: AwareDatetime | None = None  # noqa: N815


class _Alerts(_Wire):
    alerts: list[_GettableAlert]


class Alertmanager:
    """The Alertmanager backend of one source."""

    def __init__(self, source: str, config: AlertmanagerBackend,
                 transport: httpx.BaseTransport | None = None,
                 *, clock: Callable[[], datetime] | None = None) -> None:
        self.config = config
        self.client = BackendClient(source, "alertmanager", config, transport)
        self._clock = clock or (lambda: datetime.now(UTC))

    def list_alerts(self, q: AlertQuery) -> Fetched[Alert]:
        """Alerts of the service active in the window, by start then name."""
        path, params = "/api/v2/alerts", self._params(q.service)
        wire, size = self._get(path, params)
        queries = [self.client.query_text(path, params)]
        note = ""
        if not wire.alerts and q.service is not None:
            # none under the configured label: the service may be named by another one
            # (`job`, `app` ...), as most alerts of scrape targets are
            wider = {k: v for k, v in params.items() if k != "filter"}
            every, more = self._get(path, wider)
            queries.append(self.client.query_text(path, wider))
            size += more
            wire = _Alerts(alerts=[a for a in every.alerts if self._labels(a, q.service)])
            labels = sorted({label for a in wire.alerts for label in self._labels(a, q.service)})
            if labels:
                note = f"{q.service} matched as " + ", ".join(
                    f'{label}="{q.service}"' for label in labels)
        called = self._clock()
        cutoff = min(q.end, called)
        alerts = [self._alert(raw, cutoff, q.service) for raw in wire.alerts]
        alerts = sorted(
            (a for a in alerts
             if a.starts_at <= q.end and (a.ends_at is None or a.ends_at >= q.start)
             and q.state in ("any", a.state)),
            key=lambda a: (a.starts_at, a.name))
        return Fetched(items=alerts[:MAX_ALERTS], total=len(alerts), queries=tuple(queries),
                       fetched_bytes=size, as_of=called, note=note)

    def check(self) -> BackendStatus:
        """Reachable, version (`/api/v2/status`), credentials accepted."""
        return self.client.probe("/api/v2/status", _version)

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    def _get(self, path: str, params: dict[str, Any]) -> tuple[_Alerts, int]:
        body, size = self.client.get_json(path, params)
        try:
            return _Alerts.model_validate({"alerts": body}), size
        except ValidationError:
            raise self.client.error("answered /api/v2/alerts in an unknown shape") from None

    def _labels(self, raw: _GettableAlert, service: str) -> list[str]:
        """The labels among SERVICE_LABELS whose value on the alert is `service`."""
        return [label for label in SERVICE_LABELS
                if raw.labels.get(label, "").lower() == service.lower()]

    def _params(self, service: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"active": "true", "silenced": "true", "inhibited": "true",
                                  "unprocessed": "true"}
        if service is not None:
            if not SERVICE_NAME.match(service):
                raise self.client.error(f"cannot select service {service[:60]!r}: a service "
                                        "name is letters, digits and . _ : / @ -")
            params["filter"] = [f'{self.config.service_label}="{service}"']
        return params

    def _alert(self, raw: _GettableAlert, cutoff: datetime, service: str | None) -> Alert:
        # Go's zero time (year 1) on the wire means "no end known".
        ends = raw.endsAt if raw.endsAt is not None and raw.endsAt.year > 1970 else None
        ended = ends is not None and ends <= cutoff
        return Alert(
            name=raw.labels.get("alertname") or "unknown",
            service=raw.labels.get(self.config.service_label) or service
            or target_name(raw.labels, self.config.service_label) or "unknown",
            severity=raw.labels.get("severity", "unknown"),
            state="resolved" if ended else "firing",
            starts_at=raw.startsAt,
            ends_at=ends if ended else None,
            summary=self._summary(raw.annotations))

    def _summary(self, annotations: Mapping[str, str]) -> str:
        for key in self.config.summary_annotations:
            if annotations.get(key):
                return " ".join(annotations[key].split())
        return ""


def _version(body: Any) -> object:
    return body["versionInfo"]["version"]


__all__ = ["MAX_ALERTS", "Alertmanager"]
