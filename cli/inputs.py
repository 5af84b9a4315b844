"""What the commands share: reading an input file within its limit, printing one JSON object,
opening the run store, and the Verifier and Composer a check uses (offline or Claude)."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.errors import BundleError, InputError
from pipeline.model import Model
from pipeline.store import RunStore, open_store


def emit_json(payload: Any) -> None:
    """Print one JSON object on a line of its own (what `--json` prints, and nothing else)."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")


def read_input(path: str, *, max_bytes: int, what: str = "bundle",
               setting: str = "VERITY_BUNDLE_MAX_BYTES") -> str:
    """The text of a file or of stdin; more than `max_bytes` is refused before it is all read
    (a BundleError naming `what` and the `setting` that sets the limit)."""
    if path == "-":
        text = sys.stdin.read(max_bytes + 1)
    else:
        file = Path(path)
        if not file.is_file():
            raise InputError(f"no such file: {path}")
        if file.stat().st_size > max_bytes:
            raise BundleError(f"{what} is larger than {max_bytes} bytes ({setting})")
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{path} is not UTF-8 text") from None
    if len(text) > max_bytes:
        raise BundleError(f"{what} is larger than {max_bytes} bytes ({setting})")
    return text


def open_run_store() -> RunStore:
    """The run store the settings name (VERITY_DATABASE_URL, else the embedded SQLite file)."""
    return open_store(resolve_database_url(VeritySettings()))


class VerifyProvider(StrEnum):
    """Who judges and writes up a bundle in `verity verify` and a checked answer."""

    OFFLINE = "offline"
    ANTHROPIC = "anthropic"


_MISSING_KEY = ("ANTHROPIC_API_KEY is not set: set it to verify with Claude, or use "
                "--provider offline")


def verify_models(
    provider: VerifyProvider, settings: VeritySettings
) -> tuple[Model, Model]:
    """The Verifier and Composer of `verity verify`: the offline ones, or Claude's built as a
    live run builds them (`claude_agents`: model per role, ANTHROPIC_BASE_URL, retries)."""
    if provider is VerifyProvider.OFFLINE:
        return OfflineVerifier(), TemplateComposer()
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value():
        raise InputError(_MISSING_KEY)
    from pipeline.factory import claude_agents  # the SDK is imported only when used

    agents = claude_agents(settings)
    return agents.verifier, agents.composer
