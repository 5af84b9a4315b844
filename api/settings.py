"""The HTTP API's own settings: `VERITY_API_<NAME>` in the environment."""

from __future__ import annotations

from pydantic import Field
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
