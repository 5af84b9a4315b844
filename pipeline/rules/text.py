"""Text normalization shared by the Gatekeeper, the verifier and the guards."""

from __future__ import annotations

import json
import unicodedata
from typing import Any


def normalize(text: str) -> str:
    """NFC, whitespace runs collapsed to one space, ends stripped; case kept.

    `str.split()` splits on exactly the characters regex `\\s` matches in a str pattern
    (`str.isspace`), so this is `re.sub(r"\\s+", " ", nfc).strip()`, without the regex.
    """
    return " ".join(unicodedata.normalize("NFC", text).split())


def value_text(value: Any) -> str:
    """The string form of a JSON value: strings as they are, everything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


def contains(haystack: str, needle: str) -> bool:
    """True when `needle` occurs in `haystack` after both are normalized."""
    return normalize(needle) in normalize(haystack)
