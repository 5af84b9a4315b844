"""The JSONPath Compliance Test Suite's singular name/index cases (tests/data/, BSD-2-Clause):
every valid query resolves to the suite's result, every invalid selector is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.rules.jsonpath import PathError, parse_path, resolve

_CTS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "jsonpath_cts_singular.json")
    .read_text(encoding="utf-8")
)


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [case["name"] for case in cases]


def test_the_extract_is_not_empty() -> None:
    assert len(_CTS["valid"]) >= 60 and len(_CTS["invalid"]) >= 100


@pytest.mark.parametrize("case", _CTS["valid"], ids=_ids(_CTS["valid"]))
def test_valid_singular_query_resolves_to_the_suite_result(case: dict[str, Any]) -> None:
    try:
        found = [resolve(case["document"], case["selector"])]
    except PathError as exc:
        assert "does not resolve" in str(exc)
        found = []
    assert found == case["result"]


@pytest.mark.parametrize("case", _CTS["invalid"], ids=_ids(_CTS["invalid"]))
def test_invalid_selector_is_refused(case: dict[str, Any]) -> None:
    with pytest.raises(PathError):
        parse_path(case["selector"])
