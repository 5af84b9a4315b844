"""Bounding a tool result into the stored projection: items and bytes capped, cuts marked.

Claims bind to paths inside the stored projection, so the projection is what the Gatekeeper
checks against; whatever was cut is gone for good and `truncated` says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from models.invocation import Projection, QueryScope

RESERVED_KEYS = frozenset({"scope", "truncated", "total_items"})
_STRING_LIMIT = 2000
_DEPTH_LIMIT = 24
"""Deepest nesting kept below a top-level key; anything deeper is cut (serializers and the
bundle limits refuse much deeper documents, and no evidence path needs it)."""
_ELLIPSIS = "…"


def bound_projection(
    result: Mapping[str, Any],
    *,
    scope: QueryScope,
    max_items: int,
    max_bytes: int,
) -> Projection:
    """Keep at most `max_items` per list and at most `max_bytes` of JSON in all."""
    clash = RESERVED_KEYS.intersection(result)
    if clash:
        raise ValueError(f"tool result uses reserved keys: {sorted(clash)}")
    total = sum(len(v) for v in result.values() if isinstance(v, list))
    data: dict[str, Any] = {}
    truncated = False
    for key, value in result.items():
        bounded, cut = _bound_value(value, max_items=max_items)
        data[key] = bounded
        truncated = truncated or cut
    truncated = _fit_bytes(data, scope=scope, max_bytes=max_bytes) or truncated
    return Projection(scope=scope, truncated=truncated, total_items=total, **data)


def _bound_value(value: Any, *, max_items: int, depth: int = 1) -> tuple[Any, bool]:
    if isinstance(value, str) and len(value) > _STRING_LIMIT:
        return value[:_STRING_LIMIT] + _ELLIPSIS, True
    if isinstance(value, list | dict) and depth > _DEPTH_LIMIT:
        return _ELLIPSIS, True
    if isinstance(value, list):
        cut = len(value) > max_items
        items = [_bound_value(item, max_items=max_items, depth=depth + 1)
                 for item in value[:max_items]]
        return [item for item, _ in items], cut or any(c for _, c in items)
    if isinstance(value, dict):
        pairs = {k: _bound_value(v, max_items=max_items, depth=depth + 1)
                 for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def _size(data: dict[str, Any], scope: QueryScope) -> int:
    document = {"scope": scope.model_dump(mode="json"), "truncated": True, **data}
    return len(json.dumps(document, ensure_ascii=False, default=str).encode("utf-8"))


def _fit_bytes(data: dict[str, Any], *, scope: QueryScope, max_bytes: int) -> bool:
    """Drop trailing items from the longest list until the JSON fits; True if anything went."""
    cut = False
    while _size(data, scope) > max_bytes:
        lists = [(len(v), k) for k, v in data.items() if isinstance(v, list) and v]
        if not lists:
            break
        _, key = max(lists)
        data[key] = data[key][:-1]
        cut = True
    return cut


def listing_header(lines: object) -> list[str]:
    """The leading lines of a text output that hold no digit: the command that printed it
    and a listing's header (`NAME READY STATUS RESTARTS AGE`), which name its columns."""
    header: list[str] = []
    for line in lines[:3] if isinstance(lines, list) else []:
        if any(ch.isdigit() for ch in str(line)):
            break
        header.append(str(line))
    return header
