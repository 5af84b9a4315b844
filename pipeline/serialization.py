"""Byte-stable serialization: the same contract always gives the same bytes and sha256."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel


def canonical_bytes(model: BaseModel) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8: identical input, identical bytes."""
    return json.dumps(
        model.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()
