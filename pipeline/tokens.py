"""HTTP API token secrets: made here, shown once, and only their sha256 ever stored.

A secret is `vrt_` and 43 url-safe characters (256 random bits); the store looks a token up by
the secret's sha256, so a database dump holds nothing a caller could present.
"""

from __future__ import annotations

import hashlib
import secrets

SECRET_PREFIX = "vrt_"
"""Every secret starts with it: easy to spot in a leaked config, and to scan for."""


def new_secret() -> str:
    """A fresh token secret."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def new_token_id() -> str:
    """A fresh public token id (16 hex characters)."""
    return secrets.token_hex(8)


def hash_secret(secret: str) -> str:
    """The sha256 (hex) the store keeps and looks a secret up by."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
