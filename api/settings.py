"""The HTTP API's own settings: `VERITY_API_<NAME>` in the environment."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ApiSettings(BaseSettings):
    """Limits and timings of `verity serve`."""

    model_config = SettingsConfigDict(env_prefix="VERITY_API_", extra="ignore")

    runs_per_minute: float = Field(
        default=60.0, gt=0, description="Runs one token may create per minute (token bucket; "
        "a burst of this many, refilled evenly).")
    max_body_bytes: int = Field(
        default=64 * 1024, ge=1024, description="Largest request body; larger is 413.")
    keepalive_s: float = Field(
        default=15.0, gt=0, description="Seconds between keep-alive comments on an idle SSE "
        "stream.")
    poll_s: float = Field(
        default=0.1, gt=0, description="Seconds between two reads of a followed run's events "
        "(one read per run, however many follow it).")
    page_max: int = Field(default=100, ge=1, description="Largest page of `GET /runs`.")
    max_head_bytes: int = Field(
        default=16 * 1024, ge=1024, le=1024 * 1024, description="Largest request line and "
        "headers together; larger is a 431 before the rest is read (`api.server`).")
    metrics_public: bool = Field(
        default=False, description="Serve `/metrics` without a token (a scraper on a private "
        "network); otherwise it asks for an API token like every endpoint.")
    trace_url: str | None = Field(
        default=None, validation_alias=AliasChoices("VERITY_TRACE_URL", "trace_url"),
        description="Where a run's trace is shown, `{trace_id}` marking its id "
        "(https://tempo.example/trace/{trace_id}): `GET /runs/{id}` and the page then link "
        "each traced run.")
    redis_url: str | None = Field(
        default=None, description="The Redis every replica counts its rate limits in "
        "(`verity serve` takes VERITY_BROKER_URL when that is Redis); None: each process "
        "counts alone.")


def with_broker_redis(settings: ApiSettings, broker_url: str | None) -> ApiSettings:
    """`settings` counting rate limits in the broker's Redis, when the broker is Redis and
    `redis_url` names none already (an embedded memory:// broker counts in the process)."""
    broker = broker_url or ""
    if settings.redis_url or not broker.startswith(("redis://", "rediss://")):
        return settings
    return settings.model_copy(update={"redis_url": broker})
