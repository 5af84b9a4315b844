"""Alerts start runs: `POST /hooks/alertmanager` takes Alertmanager's webhook notification
(version 4; Grafana's Alertmanager-compatible contact point sends the same), authenticated by a
tenant's API token (Alertmanager's `http_config.authorization`), and
`GET /hooks/alertmanager/receipts` lists what the tenant's alert groups did.

A firing group starts one run of the tenant: the question from the alert
(`pipeline.alerting.question`: name and labels in safe characters, annotations as JSON data),
the source the tenant's routes pick (`[tenants."<id>".alerts]` of the sources file), the run's
time pinned at the group's `startsAt`. The same group again within the window, or the same
notification retried, starts nothing (`deduplicated`); over the tenant's hourly cap the group
is recorded `skipped` (listed in the receipts, answered 200 so Alertmanager does not retry); a
resolved notification is recorded on the group and its run (`RunRecord.alert.resolved_at`).

Every answer names its outcome (`AlertOutcome`), the values the metrics count. The hook is not
metered by the per-token run rate (a burst of groups is bounded by the hourly cap instead,
and never refused with a 429 Alertmanager would retry into).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from api.deps import Authenticated, CallerDep
from api.schemas import ErrorBody
from client import VerityClient
from models.alert import AlertGroup, AlertmanagerPayload, AlertOutcome, HookAnswer, RunAlert
from pipeline import telemetry
from pipeline.alerting import (
    alert_name,
    dedupe_key,
    group_labels,
    question,
    route_source,
    starts_at,
)
from pipeline.errors import ConfigurationError, InputError
from pipeline.rules.notify import ALERT_ORIGIN
from pipeline.sources.config import AlertRouting, load_config

logger = logging.getLogger("api.hooks")

hooks = APIRouter(route_class=Authenticated)

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 409, 413, 422, 503)}
MAX_RECEIPTS = 500


class ReceiptList(BaseModel):
    """The tenant's alert group records, newest first."""

    receipts: list[AlertGroup] = Field(description="started or skipped, with their runs.")


def tenant_routing(tenant: str) -> AlertRouting:
    """The tenant's `[tenants."<id>".alerts]`; a 409 when it has none (the notification is
    well formed: the server is not set up for it), a 503 when the sources file cannot be read
    (Alertmanager retries a 5xx, but drops a 4xx: the alert waits for the file's fix)."""
    try:
        config = load_config()
    except ConfigurationError as error:
        raise HTTPException(503, str(error)) from None
    found = config.tenants.get(tenant)
    if found is None or found.alerts is None:
        raise HTTPException(409, f'tenant {tenant} has no alert routing: add '
                            f'[tenants."{tenant}".alerts] to the sources file')
    return found.alerts


def _source(routing: AlertRouting, payload: AlertmanagerPayload) -> str:
    """The routed source; a 409 when no route matches and there is no default."""
    try:
        return route_source(routing, group_labels(payload))
    except InputError as error:
        raise HTTPException(409, str(error)) from None


def receive(payload: AlertmanagerPayload, client: VerityClient) -> HookAnswer:
    """What the notification does for the client's tenant (blocking: store and broker)."""
    store, tenant = client.runtime.store, client.tenant
    logger.info("alert notification %s for %s", AlertOutcome.RECEIVED.value, tenant)
    if payload.status == "resolved":
        group = store.resolve_alert_group(tenant_id=tenant, group_key=payload.groupKey)
        return _answer(AlertOutcome.RESOLVED, group)
    routing = tenant_routing(tenant)
    source = _source(routing, payload)
    outcome, group = store.claim_alert_group(
        tenant_id=tenant, dedupe_key=dedupe_key(payload), group_key=payload.groupKey,
        alertname=alert_name(payload), window_s=routing.window_s,
        max_per_hour=routing.max_runs_per_hour)
    counted = {AlertOutcome.STARTED: "received", AlertOutcome.DEDUPLICATED: "deduplicated",
               AlertOutcome.SKIPPED: "skipped"}.get(outcome)
    if counted is not None:
        telemetry.alert_received(counted)
    if outcome is not AlertOutcome.STARTED:
        return _answer(outcome, group)
    at = starts_at(payload)
    try:
        run_id = client.submit(question(payload), source=source, at=at, origin=ALERT_ORIGIN)
    except BaseException:
        store.release_alert_group(group.receipt_id)  # the retried notification starts it
        raise
    alert = RunAlert(receipt_id=group.receipt_id, group_key=payload.groupKey,
                     alertname=group.alertname, starts_at=at)
    store.attach_alert_run(group.receipt_id, run_id=run_id, alert=alert)
    return _answer(outcome, group.model_copy(update={"run_id": run_id}))


def _answer(outcome: AlertOutcome, group: AlertGroup | None) -> HookAnswer:
    logger.info("alert notification %s: receipt %s run %s", outcome.value,
                group.receipt_id if group else None, group.run_id if group else None)
    if group is None:
        return HookAnswer(outcome=outcome)
    return HookAnswer(outcome=outcome, receipt_id=group.receipt_id, run_id=group.run_id)


@hooks.post("/hooks/alertmanager", response_model=HookAnswer, tags=["alerts"],
            responses=_ERRORS)
def alertmanager_hook(body: AlertmanagerPayload, who: CallerDep) -> HookAnswer:
    """Take an Alertmanager (or Grafana) webhook notification: a firing group starts one run
    (or is `deduplicated`, or `skipped` over the hourly cap), a resolved one is recorded on
    its run."""
    return receive(body, who.client)


@hooks.get("/hooks/alertmanager/receipts", response_model=ReceiptList, tags=["alerts"],
           responses=_ERRORS)
def alert_receipts(who: CallerDep, limit: Annotated[int, Query(
        ge=1, le=MAX_RECEIPTS, description="At most this many, newest first.")] = 50,
                   ) -> ReceiptList:
    """The tenant's alert groups, newest first: the run each started, or `skipped`."""
    found = who.client.runtime.store.list_alert_groups(tenant_id=who.client.tenant, limit=limit)
    return ReceiptList(receipts=found)
