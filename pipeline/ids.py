"""Ids minted by Verity (tool_call_ids shaped like Anthropic `tool_use` ids), and the check of
the ids it is given (tenants)."""

from __future__ import annotations

import hashlib
import re

from pipeline.errors import InputError

TENANT_ID_MAX = 128
"""Longest tenant id (the `diagnosis_run.tenant_id` column)."""
_TENANT_ID = re.compile(r"[A-Za-z0-9._:@-]+")

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mint_tool_call_id(*parts: object) -> str:
    """`toolu_01` + 22 base62 characters, deterministic in `parts`."""
    number = int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest(), "big")
    chars = []
    for _ in range(22):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "toolu_01" + "".join(chars)


def check_tenant_id(tenant_id: object) -> str:
    """`tenant_id` if it is a usable owner id: 1 to 128 characters of `A-Z a-z 0-9 . _ : @ -`
    (no spaces, quotes or control characters: it lands in logs and URLs); InputError else."""
    if not isinstance(tenant_id, str) or not tenant_id:
        raise InputError("tenant id must be a non-empty string")
    if len(tenant_id) > TENANT_ID_MAX:
        raise InputError(f"tenant id must be at most {TENANT_ID_MAX} characters")
    if _TENANT_ID.fullmatch(tenant_id) is None:
        raise InputError(f"tenant id {tenant_id!r} may hold only A-Z a-z 0-9 . _ : @ -")
    return tenant_id


BATCH_ID_MAX = 64
_BATCH_ID = re.compile(r"[A-Za-z0-9_-]+")


def check_batch_id(batch_id: object) -> str:
    """`batch_id` if it is a usable batch id: 1 to 64 characters of `A-Z a-z 0-9 _ -` (it names
    task ids and files); InputError else."""
    if not isinstance(batch_id, str) or not batch_id:
        raise InputError("batch id must be a non-empty string")
    if len(batch_id) > BATCH_ID_MAX or _BATCH_ID.fullmatch(batch_id) is None:
        raise InputError(f"batch id {batch_id[:80]!r} must be 1 to {BATCH_ID_MAX} characters "
                         "of A-Z a-z 0-9 _ -")
    return batch_id
