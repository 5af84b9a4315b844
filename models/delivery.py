"""Notification deliveries as the store returns them: one per (finished run, matching target),
with every attempt to post it.

A delivery's id is its idempotency key: every attempt sends it (`Idempotency-Key`), so a
receiver that keeps the keys it has seen counts a delivery once even when an attempt was posted
and its worker died before recording it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from models.common import Contract


class DeliveryStatus(StrEnum):
    """Where a delivery stands. DELIVERED and FAILED are final."""

    PENDING = "PENDING"
    SENDING = "SENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"

    @property
    def final(self) -> bool:
        """True once no attempt will follow."""
        return self in (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)


class DeliveryAttempt(Contract):
    """One POST of a delivery (a `delivery_attempt` row)."""

    number: int = Field(description="1, 2, 3 ... per delivery.")
    outcome: str = Field(
        description="in_flight (posting), delivered, retry (will be tried again), failed "
        "(final), abandoned (its worker died mid-post; the receiver may have it).")
    status_code: int | None = Field(default=None, description="The receiver's HTTP status.")
    error: str | None = Field(default=None, description="What went wrong, one line.")
    retry_after_s: float | None = Field(
        default=None, description="The wait before the next attempt (Retry-After if given).")
    started_at: datetime = Field(description="When the attempt was claimed (UTC).")
    finished_at: datetime | None = Field(default=None, description="When it ended (UTC).")


class NewDelivery(Contract):
    """A delivery to enqueue with the run's end: the target as configured (names of the
    environment variables holding secrets, never the secrets) and its attempt budget."""

    delivery_id: str = Field(description="Stable id, derived from the run and the target.")
    kind: str = Field(description="slack or webhook.")
    target: dict[str, Any] = Field(description="The target's settings from the sources file.")
    max_attempts: int = Field(ge=1, description="Attempts before the delivery is FAILED.")


class Delivery(Contract):
    """One notification of one run to one target (a `delivery` row)."""

    delivery_id: str = Field(description="Stable id; the Idempotency-Key header of each POST.")
    run_id: str = Field(description="The run it reports.")
    tenant_id: str = Field(description="The run's tenant.")
    kind: str = Field(description="slack or webhook.")
    target: dict[str, Any] = Field(description="The target's settings (no secrets).")
    status: DeliveryStatus = Field(description="PENDING, SENDING, DELIVERED or FAILED.")
    attempts: int = Field(default=0, description="Attempts claimed so far.")
    max_attempts: int = Field(description="Attempts before it is FAILED.")
    next_attempt_at: datetime | None = Field(
        default=None, description="When a PENDING delivery may be tried next (UTC).")
    last_error: str | None = Field(default=None, description="The last attempt's error.")
    created_at: datetime = Field(description="Enqueued with the run's end (UTC).")
    updated_at: datetime = Field(description="Last change (UTC).")
    delivered_at: datetime | None = Field(default=None, description="Accepted (UTC).")
    history: list[DeliveryAttempt] = Field(
        default_factory=list, description="The attempts, oldest first.")
