"""Alerts that start runs: Alertmanager's webhook payload (version 4, which Grafana's
Alertmanager-compatible contact point sends too), what became of each notification, and the
alert a run was started for.

The payload is attacker-writable text: its models only bound and type it. What may reach a
run's question is decided by `pipeline.alerting`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from models.common import MAX_INT32, Contract, UtcTime

MAX_ALERTS = 1000
"""Alerts one notification may carry (Alertmanager's `max_alerts` is unbounded by default)."""

Labels = dict[str, str]


class Alert(BaseModel):
    """One alert of a notification. Unknown fields are kept out, not refused: Grafana adds
    its own (`silenceURL`, `values`, ...)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    status: Literal["firing", "resolved"] = Field(description="This alert's state.")
    labels: Labels = Field(default_factory=dict, description="Identify the alert.")
    annotations: Labels = Field(default_factory=dict, description="summary, description, ...")
    startsAt: UtcTime = Field(description="When it began firing.")
    endsAt: datetime | None = Field(
        default=None, description="When it resolved (zero time while firing).")
    fingerprint: str = Field(default="", max_length=128, description="Identifies the alert.")


class AlertmanagerPayload(BaseModel):
    """A webhook notification: one alert group (see the webhook_config of
    https://prometheus.io/docs/alerting/latest/configuration/#webhook_config)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: str = Field(default="4", description="Payload version; 4 is the one read.")
    groupKey: str = Field(
        min_length=1, max_length=4096, description="Identifies the group.")
    status: Literal["firing", "resolved"] = Field(description="resolved once every alert is.")
    receiver: str = Field(default="", max_length=512, description="The receiver's name.")
    groupLabels: Labels = Field(default_factory=dict)
    commonLabels: Labels = Field(default_factory=dict)
    commonAnnotations: Labels = Field(default_factory=dict)
    externalURL: str = Field(default="", max_length=2048)
    truncatedAlerts: int = Field(default=0, ge=0, le=MAX_INT32)
    alerts: list[Alert] = Field(min_length=1, max_length=MAX_ALERTS)


class AlertOutcome(StrEnum):
    """What a notification did (counted by the metrics): every one is `received`, then
    exactly one of the others."""

    RECEIVED = "received"
    STARTED = "started"
    DEDUPLICATED = "deduplicated"
    SKIPPED = "skipped"
    RESOLVED = "resolved"


class AlertGroup(Contract):
    """The record of one firing alert group of a tenant (a `receipt`): the run it started, or
    why it started none."""

    receipt_id: str = Field(description="Id of the record.")
    tenant_id: str = Field(description="Owner.")
    group_key: str = Field(description="Alertmanager's groupKey.")
    alertname: str = Field(description="The group's alert name (safe characters only).")
    outcome: AlertOutcome = Field(description="started or skipped (over the hourly cap).")
    run_id: str | None = Field(default=None, description="The run it started, if any.")
    fired_at: datetime = Field(description="When this record was taken (UTC).")
    duplicates: int = Field(default=0, ge=0, description="Notifications deduplicated onto it.")
    resolved_at: datetime | None = Field(default=None, description="Resolved notification.")


class RunAlert(Contract):
    """The alert a run was started for (on `RunRecord.alert`)."""

    receipt_id: str = Field(description="The alert group record (GET /hooks/alertmanager/"
                            "receipts).")
    group_key: str = Field(description="Alertmanager's groupKey.")
    alertname: str = Field(description="The group's alert name.")
    starts_at: datetime = Field(description="When the alert began firing: the run's time.")
    resolved_at: datetime | None = Field(default=None, description="When Verity was told it "
                                         "resolved.")


class HookAnswer(Contract):
    """The answer to one notification."""

    outcome: AlertOutcome = Field(description="started, deduplicated, skipped or resolved.")
    receipt_id: str | None = Field(default=None, description="The alert group record.")
    run_id: str | None = Field(default=None, description="The run started or found.")
