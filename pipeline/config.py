"""Settings, read from the environment (`VERITY_*`), and where the embedded database lives."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class VeritySettings(BaseSettings):
    """Verity's settings; each field reads `VERITY_<NAME>` from the environment."""

    model_config = SettingsConfigDict(env_prefix="VERITY_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; None means the default SQLite file."
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker; None means the in-process memory:// worker."
    )
    result_backend: str | None = Field(default=None, description="Celery result backend.")
    projection_max_bytes: int = Field(
        default=16384, gt=0, description="Upper bound of a stored projection, in bytes."
    )
    projection_max_items: int = Field(
        default=50, gt=0, description="Upper bound of items kept in a stored projection."
    )
    runtime_factory: str | None = Field(
        default=None,
        description="`module:function` taking VeritySettings and returning a Runtime, for "
        "workers with other agents or tools (the runtime benchmark uses it).",
    )
    faults: str = Field(
        default="",
        description="Fault injection for tests and drills, comma-separated: "
        "`delay:<node>=<seconds>` sleeps before a node body, `raise:<tool>` makes a tool fail.",
    )

    def node_delay(self, node: str) -> float:
        """Seconds to sleep before `node` runs (fault injection); 0 normally."""
        for kind, target, value in _faults(self.faults):
            if kind == "delay" and target == node:
                return float(value or 0)
        return 0.0

    def failing_tools(self) -> frozenset[str]:
        """Tools that must raise (fault injection); empty normally."""
        return frozenset(target for kind, target, _ in _faults(self.faults) if kind == "raise")


def _faults(spec: str) -> list[tuple[str, str, str]]:
    faults = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, _, rest = item.partition(":")
        target, _, value = rest.partition("=")
        faults.append((kind, target, value))
    return faults


def data_dir() -> Path:
    """`$VERITY_HOME`, else `${XDG_DATA_HOME:-~/.local/share}/verity`."""
    home = os.environ.get("VERITY_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(xdg).expanduser() / "verity"


def default_database_url() -> str:
    """The embedded default: `sqlite:///<data dir>/verity.db` (the directory is not created)."""
    return f"sqlite:///{(data_dir() / 'verity.db').absolute()}"


def resolve_database_url(settings: VeritySettings) -> str:
    """The configured database URL, else the embedded default."""
    return settings.database_url or default_database_url()
