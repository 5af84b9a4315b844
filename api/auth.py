"""Who is calling: `Authorization: Bearer <secret>` to a token of a tenant, and how fast that
token may create runs.

Only the secret's sha256 is looked up (the store never sees the secret); a missing, unknown or
revoked token is the same 401. The rate limit is a token bucket per API token, in this process:
`runs_per_minute` runs in a burst, refilled evenly.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from models.token import ApiToken
from pipeline.tokens import hash_secret

BEARER = "bearer "


class Unauthorized(Exception):  # noqa: N818 - an HTTP answer, not a Verity error
    """No usable API token: 401."""


class RateLimited(Exception):  # noqa: N818 - an HTTP answer, not a Verity error
    """Too many runs for this token: 429, retry after `retry_after_s`."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many runs created: retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


def secret_of(header: str | None) -> str:
    """The secret of an `Authorization: Bearer` header; Unauthorized without one."""
    if not header or not header.lower().startswith(BEARER):
        raise Unauthorized("missing bearer token: send Authorization: Bearer <token>")
    secret = header[len(BEARER):].strip()
    if not secret or len(secret) > 256:
        raise Unauthorized("invalid or revoked token")
    return secret


def authenticate(header: str | None, lookup: Callable[[str], ApiToken | None]) -> ApiToken:
    """The live token the header carries (looked up by its secret's sha256); Unauthorized
    otherwise."""
    token = lookup(hash_secret(secret_of(header)))
    if token is None or not token.active:
        raise Unauthorized("invalid or revoked token")
    return token


class RateLimiter:
    """A token bucket per key: `per_minute` in a burst, refilled at per_minute/60 a second."""

    def __init__(self, per_minute: float, *, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str) -> None:
        """Spend one from `key`'s bucket; RateLimited (with the seconds until one is back)
        when it is empty."""
        now = self._clock()
        with self._lock:
            level, since = self._buckets.get(key, (self.capacity, now))
            level = min(self.capacity, level + (now - since) * self.rate)
            if level < 1.0:
                self._buckets[key] = (level, now)
                raise RateLimited(max(1, math.ceil((1.0 - level) / self.rate)))
            self._buckets[key] = (level - 1.0, now)
