"""Singular JSONPath: parse and resolve `$.hits[3].message` or `$['series'][0]['peak']`.

Only names and indexes are allowed (RFC 9535 normalized paths and the dot/bracket shorthand);
wildcards, slices, filters and descendant segments are errors, since a binding must name
exactly one value.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

Segment = str | int

# RFC 9535 member-name shorthand: ALPHA / "_" / non-ASCII first, then also DIGIT and "-".
_NAME = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff-]*")
_INDEX = re.compile(r"0|-?[1-9][0-9]*")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "/": "/", "\\": "\\",
            "'": "'", '"': '"'}
_MISSING = object()


class PathError(ValueError):
    """A path that is malformed or does not resolve."""


@lru_cache(maxsize=65536)
def parse_path(path: str) -> tuple[Segment, ...]:
    """Parse a singular JSONPath into its segments, or raise PathError."""
    if not path.startswith("$"):
        raise PathError("path must start with '$'")
    segments: list[Segment] = []
    pos = 1
    while pos < len(path):
        if path.startswith("..", pos):
            raise PathError("descendant segments are not allowed")
        if path[pos] == ".":
            match = _NAME.match(path, pos + 1)
            if match is None:
                raise PathError(f"expected a member name at offset {pos + 1}")
            segments.append(match.group())
            pos = match.end()
        elif path[pos] == "[":
            segment, pos = _parse_bracket(path, pos + 1)
            segments.append(segment)
        else:
            raise PathError(f"unexpected {path[pos]!r} at offset {pos}")
    return tuple(segments)


def _parse_bracket(path: str, pos: int) -> tuple[Segment, int]:
    if pos < len(path) and path[pos] in "'\"":
        return _parse_quoted(path, pos)
    match = _INDEX.match(path, pos)
    if match is None:
        raise PathError(f"expected an index or quoted name at offset {pos}")
    end = match.end()
    if end >= len(path) or path[end] != "]":
        raise PathError(f"expected ']' at offset {end}")
    return int(match.group()), end + 1


def _parse_quoted(path: str, pos: int) -> tuple[Segment, int]:
    quote = path[pos]
    chars: list[str] = []
    i = pos + 1
    while i < len(path):
        ch = path[i]
        if ch == "\\" and i + 1 < len(path):
            char, i = _unescape(path, i + 1)
            chars.append(char)
            continue
        if ch == quote:
            if i + 1 >= len(path) or path[i + 1] != "]":
                raise PathError(f"expected ']' at offset {i + 1}")
            return "".join(chars), i + 2
        chars.append(ch)
        i += 1
    raise PathError("unterminated quoted name")


def _unescape(path: str, pos: int) -> tuple[str, int]:
    """The character an escape at `pos` (just after the backslash) stands for, and the next
    offset."""
    code = path[pos]
    if code in _ESCAPES:
        return _ESCAPES[code], pos + 1
    if code == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", path[pos + 1:pos + 5]):
        return chr(int(path[pos + 1:pos + 5], 16)), pos + 5
    raise PathError(f"invalid escape '\\{code}' at offset {pos}")


def resolve(document: Any, path: str) -> Any:
    """Return the single value at `path` in `document`, or raise PathError."""
    value = document
    for segment in parse_path(path):
        value = _step(value, segment)
        if value is _MISSING:
            raise PathError(f"{path} does not resolve")
    return value


def _step(value: Any, segment: Segment) -> Any:
    if isinstance(segment, int):
        if isinstance(value, list) and -len(value) <= segment < len(value):
            return value[segment]
        return _MISSING
    if isinstance(value, dict):
        return value.get(segment, _MISSING)
    return _MISSING
