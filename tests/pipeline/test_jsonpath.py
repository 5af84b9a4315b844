"""The singular JSONPath parser: what it accepts, what it refuses, and how it resolves."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.rules.jsonpath import PathError, parse_path, resolve

DOC: dict[str, Any] = {
    "hits": [{"message": "pool exhausted", "level": "ERROR"}, {"message": "timeout"}],
    "series": [{"peak": 41.8, "tags": {"env": "prod"}}],
    "scope": {"service": "checkout-service", "filter": None},
    "odd keys": {"it's": 1, "back\\slash": 2, "0": "zero", "": "empty", "a-b": 3},
    "total": 1432,
    "flag": False,
}


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("$", ()),
        ("$.hits[3].message", ("hits", 3, "message")),
        ("$['series'][0]['peak']", ("series", 0, "peak")),
        ('$["series"][0]["peak"]', ("series", 0, "peak")),
        ("$.series[0]['peak']", ("series", 0, "peak")),
        ("$['it\\'s']", ("it's",)),
        ("$['back\\\\slash']", ("back\\slash",)),
        ("$.a-b._c9", ("a-b", "_c9")),
        ("$[-1]", (-1,)),
        ("$[10]", (10,)),
        ("$['']", ("",)),
        ("$['odd keys']", ("odd keys",)),
        ("$ .a", ("a",)),
        ("$[ 'a' ]\n[\t0\r]", ("a", 0)),
        ("$['\\uD834\\uDD1E']", ("\U0001d11e",)),
        ("$[9007199254740991]", (2**53 - 1,)),
        ("$[-9007199254740991]", (-(2**53 - 1),)),
    ],
    ids=["root", "dot-form", "normalized-bracket-form", "double-quoted", "mixed",
         "escaped-quote", "escaped-backslash", "hyphen-and-underscore-names",
         "negative-index", "multi-digit-index", "empty-name", "name-with-space",
         "rfc9535-space-before-dot-segment", "rfc9535-blanks-inside-brackets",
         "rfc9535-surrogate-pair-escape", "rfc9535-max-index", "rfc9535-min-index"],
)
def test_parse_path_accepts_singular_paths(path: str, segments: tuple[Any, ...]) -> None:
    assert parse_path(path) == segments


@pytest.mark.parametrize(
    "path",
    [
        "", "hits[0]", ".hits", "$.", "$..", "$.hits.", "$.[0]", "$[", "$[0", "$[]",
        "$['a'", "$['a'x", "$['a']]", "$[a]", "$[01]", "$[1.5]", "$[+1]", "$[0x1]",
        "$.a b", "$.1a", "$hits", "$.a$", "$.a ", "$[0 ", "$. a", "$[0,1 ]",
    ],
    ids=["empty", "no-root", "leading-dot", "trailing-dot", "bare-descendant",
         "dangling-dot", "dot-bracket", "open-bracket", "unclosed-index", "empty-brackets",
         "unterminated-quote", "junk-after-quote", "extra-close", "unquoted-name",
         "leading-zero", "fractional-index", "plus-sign", "hex-index", "space-in-name",
         "digit-leading-name", "name-glued-to-root", "stray-dollar", "trailing-space",
         "unclosed-index-with-space", "space-after-dot", "union-with-space"],
)
def test_parse_path_rejects_malformed_paths(path: str) -> None:
    with pytest.raises(PathError):
        parse_path(path)


@pytest.mark.parametrize(
    "path",
    ["$.*", "$[*]", "$.hits[*].message", "$.hits.*"],
    ids=["dot-wildcard", "bracket-wildcard", "index-wildcard", "member-wildcard"],
)
def test_parse_path_rejects_wildcards(path: str) -> None:
    with pytest.raises(PathError):
        parse_path(path)


@pytest.mark.parametrize(
    "path",
    ["$.hits[?@.level=='ERROR']", "$.hits[?(@.level)]", "$[?@]"],
    ids=["rfc-filter", "legacy-filter", "bare-filter"],
)
def test_parse_path_rejects_filters(path: str) -> None:
    with pytest.raises(PathError):
        parse_path(path)


@pytest.mark.parametrize(
    "path",
    ["$..message", "$.hits..message", "$..[0]", "$..['message']"],
    ids=["root-descendant", "nested-descendant", "descendant-index", "descendant-bracket"],
)
def test_parse_path_rejects_descendant_segments(path: str) -> None:
    with pytest.raises(PathError, match="descendant"):
        parse_path(path)


@pytest.mark.parametrize(
    "path",
    ["$[0:2]", "$[::2]", "$[0,1]", "$['a','b']", "$.hits[1:]"],
    ids=["slice", "step-slice", "index-union", "name-union", "open-slice"],
)
def test_parse_path_rejects_slices_and_unions(path: str) -> None:
    with pytest.raises(PathError):
        parse_path(path)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("$", DOC),
        ("$.hits[0].message", "pool exhausted"),
        ("$['hits'][1]['message']", "timeout"),
        ("$.hits[-1].message", "timeout"),
        ("$.hits[-2].level", "ERROR"),
        ("$.series[0].tags", {"env": "prod"}),
        ("$.series[0].peak", 41.8),
        ("$.scope.filter", None),
        ("$.flag", False),
        ("$['odd keys']['it\\'s']", 1),
        ("$['odd keys']['0']", "zero"),
        ("$['odd keys']['']", "empty"),
        ("$['odd keys'].a-b", 3),
    ],
    ids=["root", "dot", "bracket", "last", "negative", "object-value", "number", "null-value",
         "false-value", "escaped-name", "digit-name", "empty-name", "hyphen-name"],
)
def test_resolve_returns_the_single_value(path: str, value: Any) -> None:
    assert resolve(DOC, path) == value


@pytest.mark.parametrize(
    "path",
    [
        "$.hits[2]", "$.hits[-3]", "$.hits[100].message", "$.series[1]",
        "$.hits[0].body", "$.nope", "$.hits.message", "$['odd keys'][0]",
        "$.total[0]", "$.total.value", "$.hits[0].message[0]", "$.scope.filter.x",
    ],
    ids=["index-past-end", "negative-past-start", "far-past-end", "second-series",
         "missing-key", "missing-root-key", "name-on-list", "index-on-object",
         "index-on-number", "name-on-number", "index-on-string", "name-on-null"],
)
def test_resolve_raises_path_error_when_nothing_is_there(path: str) -> None:
    with pytest.raises(PathError, match="does not resolve"):
        resolve(DOC, path)


def test_resolve_raises_path_error_for_malformed_paths_before_walking() -> None:
    with pytest.raises(PathError):
        resolve(DOC, "$.hits[*]")
    with pytest.raises(PathError):
        resolve([], "hits")


def test_path_error_is_a_value_error() -> None:
    assert issubclass(PathError, ValueError)


def test_parse_path_decodes_rfc9535_escapes() -> None:
    assert parse_path("$['a\\nb']") == ("a\nb",)


def test_parse_path_rejects_negative_zero() -> None:
    with pytest.raises(PathError):
        parse_path("$[-0]")


@pytest.mark.parametrize(
    "path",
    [
        "$[9007199254740992]", "$[-9007199254740992]", "$[" + "9" * 5000 + "]",
        "$['\x01']", "$['a\nb']", "$[\"\\'\"]", "$['\\\"']", "$['\\uD800']",
        "$['\\uDC00']", "$['\\uD800\\u0041']", "$['\ud800']", "$.\ud800",
        "$." + "a" * 5000,
    ],
    ids=["index-above-2^53-1", "index-below-minus-2^53-1", "index-of-5000-digits",
         "raw-control-char", "raw-newline", "escaped-single-quote-in-double-quotes",
         "escaped-double-quote-in-single-quotes", "lone-high-surrogate", "lone-low-surrogate",
         "high-surrogate-then-bmp", "raw-lone-surrogate", "raw-surrogate-in-dot-name",
         "path-too-long"],
)
def test_parse_path_rejects_what_rfc9535_forbids(path: str) -> None:
    with pytest.raises(PathError):
        parse_path(path)
