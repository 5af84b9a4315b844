"""`list_alerts`, `list_deployments` and `get_events`: what fired and what changed in a window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from models.invocation import QueryScope, TimeWindow
from pipeline.data.records import Alert, Deployment, KubeEvent, iso
from pipeline.data.source import AlertQuery, ChangeQuery, EventQuery, Fetched
from pipeline.tools.formatting import plural
from pipeline.tools.source import ToolOutput, WindowedArgs, time_window

if TYPE_CHECKING:
    from pipeline.data.source import DataSource

ALERTS_DESCRIPTION = (
    "List alerts of a service (or all services) that were active at any time in the window, "
    "optionally only those still firing or already resolved. Each alert has a one-line summary."
)
DEPLOYMENTS_DESCRIPTION = (
    "List deployments and configuration changes of a service (or of all services) rolled out "
    "in the window, oldest first, each with version, previous version, time, author, the change "
    "in words and a one-line summary."
)
EVENTS_DESCRIPTION = (
    "List Kubernetes events in the window for the objects of a service (object names starting "
    "with the service name), optionally filtered by namespace, reason (e.g. OOMKilled, BackOff, "
    "Unhealthy, Failed) and type (Warning or Normal). Returns the events and per-reason totals "
    "(events, summed counts, objects, first/last time, summary)."
)
MAX_OBJECTS = 5


class ListAlertsArgs(WindowedArgs):
    """Arguments of list_alerts."""

    service: str | None = Field(default=None, description="Service; all services if omitted.")
    state: Literal["firing", "resolved", "any"] = Field(
        default="any", description="firing, resolved or any (default)."
    )


class ListDeploymentsArgs(WindowedArgs):
    """Arguments of list_deployments."""

    service: str | None = Field(default=None, description="Service; all services if omitted.")


class GetEventsArgs(WindowedArgs):
    """Arguments of get_events."""

    service: str | None = Field(
        default=None, description="Service whose objects (name prefix) to list; all if omitted."
    )
    namespace: str | None = Field(default=None, description="Namespace; all if omitted.")
    reason: str | None = Field(default=None, description="Event reason, e.g. OOMKilled.")
    type: Literal["Normal", "Warning"] | None = Field(default=None, description="Event type.")


def list_alerts(source: DataSource, args: ListAlertsArgs) -> ToolOutput:
    """Alerts active at any time in the window."""
    start, end = args.resolve(source.now)
    fetched = source.list_alerts(AlertQuery(start=start, end=end, service=args.service,
                                            state=args.state))
    alerts = sorted(fetched.items, key=lambda a: (a.starts_at, a.name))
    scope = QueryScope(service=args.service, window=alerts_window(fetched, start, end),
                       filter=f"state = {args.state}", queries=list(fetched.queries) or None,
                       note=fetched.note or None)
    return ToolOutput(
        result={"alerts": [_alert_json(a) for a in alerts],
                "firing": sum(1 for a in alerts if a.state == "firing")},
        scope=scope, found=bool(alerts),
    )


def alerts_window(fetched: Fetched[Alert], start: datetime, end: datetime) -> TimeWindow:
    """The window an alerts answer covers: the one asked, or the one moment the backend
    answered for (`as_of`: Alertmanager lists the alerts active now and keeps no history),
    so a negative observation is never wider than what was seen."""
    if fetched.as_of is not None:
        moment = fetched.as_of.replace(microsecond=0)
        return time_window(moment, moment)
    return time_window(start, end)


def _alert_json(alert: Alert) -> dict[str, Any]:
    if alert.state == "firing":
        when = f"firing since {iso(alert.starts_at)}"
    else:
        ended = iso(alert.ends_at) if alert.ends_at else "unknown"
        when = f"fired from {iso(alert.starts_at)} to {ended}"
    about = f": {alert.summary}" if alert.summary else ""
    return {
        "name": alert.name, "service": alert.service, "severity": alert.severity,
        "state": alert.state, "starts_at": iso(alert.starts_at),
        "ends_at": iso(alert.ends_at) if alert.ends_at else None,
        "summary": f"{alert.name} ({alert.severity}) for {alert.service}, {when}{about}",
    }


def list_deployments(source: DataSource, args: ListDeploymentsArgs) -> ToolOutput:
    """Deployments rolled out in the window."""
    start, end = args.resolve(source.now)
    fetched = source.list_deployments(ChangeQuery(start=start, end=end, service=args.service))
    deployments = sorted(fetched.items, key=lambda d: d.deployed_at)
    scope = QueryScope(service=args.service, window=time_window(start, end),
                       filter=None if args.service else "all services",
                       queries=list(fetched.queries) or None)
    return ToolOutput(result={"deployments": [deployment_json(d) for d in deployments]},
                      scope=scope, found=bool(deployments))


def deployment_json(deployment: Deployment) -> dict[str, Any]:
    """One deployment as tools print it."""
    verb = "config change applied" if deployment.kind == "config" else "deployed"
    previous = f" (previous {deployment.previous_version})" if deployment.previous_version else ""
    author = f" by {deployment.author}" if deployment.author else ""
    status = "" if deployment.status == "succeeded" else f" [{deployment.status}]"
    change = f": {deployment.change}" if deployment.change else ""
    return {
        "service": deployment.service, "version": deployment.version,
        "previous_version": deployment.previous_version,
        "deployed_at": iso(deployment.deployed_at), "author": deployment.author,
        "kind": deployment.kind, "status": deployment.status, "change": deployment.change,
        "summary": (f"{deployment.service} {deployment.version} {verb} at "
                    f"{iso(deployment.deployed_at)}{previous}{author}{status}{change}"),
    }


@dataclass
class _Reason:
    reason: str
    type: str
    first: datetime
    last: datetime
    events: int = 0
    count: int = 0
    objects: list[str] = field(default_factory=list)
    example: str = ""


def get_events(source: DataSource, args: GetEventsArgs) -> ToolOutput:
    """Kubernetes events of a service's objects in the window."""
    start, end = args.resolve(source.now)
    fetched = source.get_events(EventQuery(start=start, end=end, service=args.service,
                                           namespace=args.namespace, reason=args.reason,
                                           type=args.type))
    events = sorted(fetched.items, key=lambda e: e.ts)
    scope = QueryScope(service=args.service, window=time_window(start, end),
                       filter=_events_filter(args), queries=list(fetched.queries) or None)
    reasons = _reasons(events)
    return ToolOutput(
        result={
            "reasons": [_reason_json(r) for r in reasons],
            "events": [_event_json(e) for e in events],
        },
        scope=scope, found=bool(events),
    )


def _events_filter(args: GetEventsArgs) -> str | None:
    parts = [f"{name} = {value}" for name, value in
             (("namespace", args.namespace), ("reason", args.reason), ("type", args.type)) if value]
    return " AND ".join(parts) or None


def _reasons(events: Sequence[KubeEvent]) -> list[_Reason]:
    reasons: dict[str, _Reason] = {}
    for event in events:
        group = reasons.get(event.reason)
        if group is None:
            group = reasons[event.reason] = _Reason(event.reason, event.type, event.ts, event.ts,
                                                    example=event.message)
        group.events += 1
        group.count += event.count
        group.last = event.ts
        if event.object not in group.objects:
            group.objects.append(event.object)
    return sorted(reasons.values(), key=lambda r: (r.type != "Warning", -r.events, r.reason))


def _reason_json(group: _Reason) -> dict[str, Any]:
    summary = (
        f"{plural(group.events, group.reason + ' event')} ({group.type}, summed count "
        f"{group.count}) on {plural(len(group.objects), 'object')} between {iso(group.first)} "
        f"and {iso(group.last)}"
        + (f", e.g. {group.example}" if group.example else "")
    )
    return {
        "reason": group.reason, "type": group.type, "events": group.events,
        "count": group.count, "objects": group.objects[:MAX_OBJECTS],
        "first_ts": iso(group.first), "last_ts": iso(group.last), "example": group.example,
        "summary": summary,
    }


def _event_json(event: KubeEvent) -> dict[str, Any]:
    return {
        "ts": iso(event.ts), "namespace": event.namespace, "kind": event.kind,
        "object": event.object, "reason": event.reason, "type": event.type,
        "message": event.message, "count": event.count,
        "summary": (f"{iso(event.ts)} {event.kind}/{event.object} {event.reason} "
                    f"(count {event.count}): {event.message}"),
    }
