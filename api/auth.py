"""Who is calling: `Authorization: Bearer <secret>` to a token of a tenant, and how fast that
token may create runs.

Only the secret's sha256 is looked up (the store never sees the secret); a missing, unknown or
revoked token is the same 401. The rate limit is a token bucket per API token:
`runs_per_minute` runs in a burst, refilled evenly. With Redis (`RedisRateLimiter`) every
replica of the API spends from the same bucket; without (`verity serve --embedded`), the one
process keeps it (`RateLimiter`).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from models.token import ApiToken
from pipeline.errors import BrokerUnavailableError
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


class Limiter(Protocol):
    """Spends from a key's budget."""

    def take(self, key: str) -> None:
        """Spend one from `key`'s bucket; RateLimited when it is empty."""

    def close(self) -> None:
        """Release what it holds."""


class RateLimiter:
    """A token bucket per key, in this process: `per_minute` in a burst, refilled at
    per_minute/60 a second."""

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

    def close(self) -> None:
        """Nothing to release."""


# KEYS[1] the bucket; ARGV capacity, refill per second. Redis's own clock, so replicas whose
# clocks differ still agree; the bucket expires once it would be full again (nothing to keep).
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local kept = redis.call('HMGET', KEYS[1], 'level', 'since')
local level = tonumber(kept[1]) or capacity
local since = tonumber(kept[2]) or now
level = math.min(capacity, level + math.max(0, now - since) * rate)
local wait_ms = 0
if level < 1 then
  wait_ms = math.ceil((1 - level) / rate * 1000)
else
  level = level - 1
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'since', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000) + 1000)
return wait_ms
"""

RATE_KEY_PREFIX = "verity:api:rate:"


class RedisRateLimiter:
    """The same token bucket per key, kept in Redis and spent by one atomic script: every
    process on that Redis shares a key's budget. The key is stored as its sha256 (with the
    prefix RATE_KEY_PREFIX) and expires once its bucket is full again; an unreachable Redis is
    BrokerUnavailableError (503), never a free pass."""

    def __init__(self, url: str, per_minute: float) -> None:
        self.capacity = per_minute
        self.rate = per_minute / 60.0
        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=3)
        self._take = self._redis.register_script(_TAKE)

    def take(self, key: str) -> None:
        """Spend one from `key`'s bucket; RateLimited (with the seconds until one is back)
        when it is empty."""
        bucket = RATE_KEY_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()
        try:
            wait_ms = int(self._take(keys=[bucket], args=[repr(self.capacity), repr(self.rate)]))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise BrokerUnavailableError(f"rate limit store unreachable: {exc}") from None
        if wait_ms > 0:
            raise RateLimited(max(1, math.ceil(wait_ms / 1000)))

    def close(self) -> None:
        """Release the connections."""
        self._redis.close()


def limiter_for(per_minute: float, redis_url: str | None) -> Limiter:
    """The limiter of `per_minute` runs: shared through `redis_url`, else this process's."""
    if redis_url:
        return RedisRateLimiter(redis_url, per_minute)
    return RateLimiter(per_minute)
