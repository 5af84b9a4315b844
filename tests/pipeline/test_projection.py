"""Bounded projections: items and bytes capped, the cut marked, paths still resolve."""

from __future__ import annotations

import json

import pytest

from models.invocation import QueryScope, TimeWindow
from pipeline.rules.jsonpath import resolve
from pipeline.rules.projection import bound_projection

SCOPE = QueryScope(
    service="checkout-service",
    window=TimeWindow(start="2026-11-30T14:00:00Z", end="2026-11-30T15:00:00Z"),
    filter="level:error",
)


def _hits(n: int) -> list[dict[str, str]]:
    return [{"ts": f"2026-11-30T14:{i % 60:02d}:00Z", "message": f"error number {i}"}
            for i in range(n)]


def test_projection__small_result_is_kept_whole() -> None:
    projection = bound_projection({"hits": _hits(3), "total": 3}, scope=SCOPE,
                                  max_items=50, max_bytes=16384)
    document = projection.model_dump(mode="json")
    assert projection.truncated is False
    assert projection.total_items == 3
    assert resolve(document, "$.hits[2].message") == "error number 2"
    assert resolve(document, "$.scope.service") == "checkout-service"


def test_projection__items_are_capped_and_marked() -> None:
    projection = bound_projection({"hits": _hits(500), "total": 500}, scope=SCOPE,
                                  max_items=20, max_bytes=1_000_000)
    document = projection.model_dump(mode="json")
    assert projection.truncated is True
    assert len(document["hits"]) == 20
    assert projection.total_items == 500
    assert document["total"] == 500


def test_projection__bytes_are_capped_and_marked() -> None:
    projection = bound_projection({"hits": _hits(200)}, scope=SCOPE, max_items=200,
                                  max_bytes=2048)
    size = len(json.dumps(projection.model_dump(mode="json")).encode())
    assert projection.truncated is True
    assert size <= 2048
    assert 0 < len(projection.model_dump()["hits"]) < 200


def test_projection__reserved_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="reserved keys"):
        bound_projection({"scope": "mine"}, scope=SCOPE, max_items=5, max_bytes=1000)


def test_projection__long_strings_are_cut() -> None:
    projection = bound_projection({"text": "x" * 10_000}, scope=SCOPE, max_items=5,
                                  max_bytes=100_000)
    assert projection.truncated is True
    assert len(projection.model_dump()["text"]) < 10_000
