"""Ids minted by Verity: tool_call_ids shaped like Anthropic `tool_use` ids."""

from __future__ import annotations

import hashlib

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mint_tool_call_id(*parts: object) -> str:
    """`toolu_01` + 22 base62 characters, deterministic in `parts`."""
    number = int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest(), "big")
    chars = []
    for _ in range(22):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "toolu_01" + "".join(chars)
