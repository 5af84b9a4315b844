"""Answers reach the team: notification targets per tenant (a Slack incoming webhook, a signed
JSON webhook), the deliveries a released run enqueues, and the POST of one delivery.

    plan        the deliveries a released run enqueues (the sources file's rules)
    messages    the Slack message and the webhook body of a run (pure)
    signing     the webhook signature scheme (HMAC-SHA256 over timestamp and body)
    sender      one attempt of one delivery: claim, POST, record, next try

Delivery is at-least-once on the wire and exactly-once at a receiver that dedupes by the
`Idempotency-Key` header (the delivery id): a worker killed after its POST reached the
receiver and before it recorded the answer leaves an expired claim, and the POST is sent
again, with the same key.
"""

from pipeline.notify.plan import plan_deliveries
from pipeline.notify.sender import SendResult, deliver
from pipeline.notify.signing import sign, signature_headers

__all__ = ["SendResult", "deliver", "plan_deliveries", "sign", "signature_headers"]
