"""The webhook signature: HMAC-SHA256, keyed by the target's secret, over
`<timestamp>.<body>` (the timestamp in decimal Unix seconds, a dot, the body's bytes as sent).

Headers of every webhook POST:

    X-Verity-Timestamp: 1764770000
    X-Verity-Signature: v1=<hex digest>
    Idempotency-Key: <delivery id>

A receiver recomputes the digest over the timestamp header, a dot and the raw body, compares
it in constant time, and refuses timestamps far from its clock (replays).
"""

from __future__ import annotations

import hashlib
import hmac

TIMESTAMP_HEADER = "X-Verity-Timestamp"
SIGNATURE_HEADER = "X-Verity-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
SCHEME = "v1"


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The signature header's value: `v1=` and the hex HMAC-SHA256 of `<timestamp>.<body>`."""
    digest = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"{SCHEME}={digest.hexdigest()}"


def signature_headers(secret: bytes, timestamp: int, body: bytes) -> dict[str, str]:
    """The timestamp and signature headers of a POST of `body`."""
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: sign(secret, timestamp, body)}
