"""One attempt of one delivery: claim it in the store, build the message from the released
run, POST it, record how it ended and when to try again.

The POST never follows a redirect (a 3xx is a failure: a webhook that moved is reconfigured,
not chased to another host), waits at most the target's `timeout_s`, and is tried again on a
connection error, a timeout, 408, 429 and 5xx: after `backoff_s` doubled per attempt (at most
`MAX_BACKOFF_S`), or after the receiver's Retry-After (seconds or an HTTP date, at most
`MAX_RETRY_AFTER_S`). Past `max_attempts`, or on any other answer, the delivery is FAILED.
Secrets are read from the environment at each attempt and never written to a row or an error.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from models.delivery import Delivery
from pipeline import telemetry
from pipeline.errors import ConfigurationError
from pipeline.notify.messages import slack_message, webhook_body
from pipeline.notify.signing import IDEMPOTENCY_HEADER, signature_headers
from pipeline.store import RunStore
from pipeline.store.deliveries import EndOutcome

MAX_BACKOFF_S = 600.0
MAX_RETRY_AFTER_S = 3600.0
RETRY_STATUSES = frozenset({408, 429})
USER_AGENT = "verity-notify/1"


@dataclass(frozen=True, slots=True)
class SendResult:
    """How one POST ended: `delivered`, `retry` (worth another try) or `failed` (final)."""

    outcome: EndOutcome
    status_code: int | None = None
    error: str | None = None
    retry_after_s: float | None = None
    """The receiver's Retry-After, in seconds, if it sent one."""


def deliver(store: RunStore, delivery_id: str, *, owner: str, lease_s: float,
            public_url: str | None, env: Mapping[str, str] | None = None,
            transport: httpx.BaseTransport | None = None) -> Delivery | None:
    """Make one attempt of the delivery if it is due and free; the delivery as the attempt
    left it. None, and nothing posted, if no attempt was made: the delivery is final, not yet
    due, claimed by a live worker, or unknown (so a duplicate message schedules nothing)."""
    claimed = store.claim_delivery(delivery_id, owner=owner, lease_s=lease_s)
    if claimed is None:
        return None
    delivery, number = claimed
    try:
        url, body, headers = build_request(store, delivery, public_url=public_url,
                                           env=os.environ if env is None else env)
    except ConfigurationError as exc:
        result = SendResult("failed", error=str(exc))
    else:
        result = post(url, body, headers, timeout_s=float(delivery.target.get("timeout_s", 10)),
                      transport=transport)
    return _record(store, delivery, number, result, owner=owner)


def build_request(store: RunStore, delivery: Delivery, *, public_url: str | None,
                  env: Mapping[str, str]) -> tuple[str, bytes, dict[str, str]]:
    """The URL, body and headers of the delivery's POST; ConfigurationError (one line) when
    a variable it names is not set."""
    run = store.get_run(delivery.run_id, tenant_id=delivery.tenant_id)
    target = delivery.target
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               IDEMPOTENCY_HEADER: delivery.delivery_id}
    if delivery.kind == "slack":
        url = _variable(env, target["url_env"], "the Slack webhook URL")
        return url, _dumps(slack_message(run, public_url=public_url)), headers
    secret = _variable(env, target["secret_env"], "the webhook secret")
    body = _dumps(webhook_body(run, delivery_id=delivery.delivery_id, public_url=public_url))
    headers.update(signature_headers(secret.encode(), int(time.time()), body))
    return str(target["url"]), body, headers


def post(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float,
         transport: httpx.BaseTransport | None = None) -> SendResult:
    """POST once, without following redirects; how it ended."""
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False,
                          transport=transport, trust_env=False) as client:
            response = client.post(url, content=body, headers=headers)
    except httpx.TimeoutException:
        return SendResult("retry", error=f"no answer within {timeout_s:g} s")
    except httpx.TransportError as exc:
        return SendResult("retry", error=f"cannot connect: {type(exc).__name__}: "
                                         f"{_one_line(str(exc))}")
    except httpx.InvalidURL as exc:  # a URL the sources file let through but httpx refuses
        return SendResult("failed", error=f"invalid URL: {_one_line(str(exc))}")
    return classify(response.status_code, response.headers)


def classify(status: int, headers: Mapping[str, str], *, now: datetime | None = None
             ) -> SendResult:
    """A receiver's answer as a `SendResult`."""
    if 200 <= status < 300:
        return SendResult("delivered", status_code=status)
    if 300 <= status < 400:
        return SendResult("failed", status_code=status,
                          error=f"HTTP {status}: redirect not followed")
    error = f"HTTP {status}"
    if status in RETRY_STATUSES or status >= 500:
        return SendResult("retry", status_code=status, error=error,
                          retry_after_s=retry_after(headers.get("retry-after"), now=now))
    return SendResult("failed", status_code=status, error=error)


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """A Retry-After header in seconds (delta-seconds or an HTTP date), at most
    `MAX_RETRY_AFTER_S`; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    wait = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(wait, 0.0), MAX_RETRY_AFTER_S)


def backoff(number: int, backoff_s: float) -> float:
    """The wait after attempt `number` without a Retry-After: `backoff_s` doubled per
    attempt, at most `MAX_BACKOFF_S`."""
    return min(MAX_BACKOFF_S, backoff_s * 2.0 ** min(number - 1, 32))


def _record(store: RunStore, delivery: Delivery, number: int, result: SendResult, *,
            owner: str) -> Delivery | None:
    now = datetime.now(UTC)
    outcome, error, retry_at = result.outcome, result.error, None
    if outcome == "retry":
        if number >= delivery.max_attempts:
            outcome, error = "failed", f"gave up after {number} attempts: {result.error}"
        else:
            wait = result.retry_after_s
            if wait is None:
                wait = backoff(number, float(delivery.target.get("backoff_s", 2.0)))
            retry_at = now + timedelta(seconds=wait)
    ended = store.end_delivery_attempt(
        delivery.delivery_id, number, owner=owner, outcome=outcome,
        status_code=result.status_code, error=error, retry_at=retry_at, now=now)
    if ended is not None:  # this attempt's end was recorded (its claim still held)
        telemetry.delivery({"retry": "retried"}.get(outcome, outcome))
    return ended if ended is not None else store.get_delivery(delivery.delivery_id)


def _variable(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigurationError(f"{name} is not set ({what})")
    return value


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
