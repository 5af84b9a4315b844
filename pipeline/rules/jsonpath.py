"""Singular JSONPath: parse and resolve `$.hits[3].message` or `$['series'][0]['peak']`.

The grammar is RFC 9535's, restricted to child segments holding exactly one name or index
selector, so that a binding names exactly one value:

    path     = "$" *(S segment)                  S = *(space / tab / LF / CR)
    segment  = "[" S (quoted-name / index) S "]" / "." member-name
    index    = "0" / ["-"] DIGIT1 *DIGIT         within ±(2^53 − 1), no leading zeros
    quoted   = '...' or "..." with RFC 9535 escapes (\\b \\f \\n \\r \\t \\/ \\\\ \\uXXXX, a
               surrogate pair as two \\u escapes, \\' only inside '...', \\" only inside "..."),
               no raw control characters, no lone surrogates

One extension is kept from the paths accepted before the standard was followed exactly: a dot
member name may contain "-" after its first character (`$.a-b`). Wildcards, slices, unions,
filters and descendant segments are errors.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

Segment = str | int

MAX_PATH_LENGTH = 4096
"""Longest path parsed at all; longer ones are refused before any work (bounded input)."""
MAX_INDEX = 2**53 - 1
_MAX_INDEX_DIGITS = len(str(MAX_INDEX))

# RFC 9535 member-name-shorthand (ALPHA / "_" / %x80-D7FF / %xE000-10FFFF first, then also
# DIGIT), plus "-" after the first character.
_NAME = re.compile(
    "[A-Za-z_\u0080-\ud7ff\ue000-\U0010ffff][A-Za-z0-9_\u0080-\ud7ff\ue000-\U0010ffff-]*"
)
_INDEX = re.compile(r"-?[0-9]+")
_BLANK = frozenset(" \t\n\r")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "/": "/", "\\": "\\"}
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_MISSING = object()


class PathError(ValueError):
    """A path that is malformed or does not resolve."""


@lru_cache(maxsize=8192)
def parse_path(path: str) -> tuple[Segment, ...]:
    """Parse a singular JSONPath into its segments, or raise PathError."""
    if len(path) > MAX_PATH_LENGTH:
        raise PathError(f"path longer than {MAX_PATH_LENGTH} characters")
    if not path.startswith("$"):
        raise PathError("path must start with '$'")
    segments: list[Segment] = []
    pos = 1
    end = len(path)
    while pos < end:
        pos = _skip_blank(path, pos)
        if pos >= end:
            raise PathError("trailing whitespace after the path")
        char = path[pos]
        if char == ".":
            segment, pos = _parse_dot(path, pos + 1)
        elif char == "[":
            segment, pos = _parse_bracket(path, pos + 1)
        else:
            raise PathError(f"unexpected {char!r} at offset {pos}")
        segments.append(segment)
    return tuple(segments)


def _skip_blank(path: str, pos: int) -> int:
    while pos < len(path) and path[pos] in _BLANK:
        pos += 1
    return pos


def _parse_dot(path: str, pos: int) -> tuple[Segment, int]:
    if path.startswith(".", pos):
        raise PathError("descendant segments are not allowed")
    match = _NAME.match(path, pos)
    if match is None:
        raise PathError(f"expected a member name at offset {pos}")
    return match.group(), match.end()


def _parse_bracket(path: str, pos: int) -> tuple[Segment, int]:
    pos = _skip_blank(path, pos)
    segment: Segment
    if pos < len(path) and path[pos] in "'\"":
        segment, pos = _parse_quoted(path, pos)
    else:
        segment, pos = _parse_index(path, pos)
    pos = _skip_blank(path, pos)
    if pos >= len(path) or path[pos] != "]":
        raise PathError(f"expected ']' at offset {pos} (one name or index per bracket)")
    return segment, pos + 1


def _parse_index(path: str, pos: int) -> tuple[int, int]:
    match = _INDEX.match(path, pos)
    if match is None:
        raise PathError(f"expected an index or quoted name at offset {pos}")
    text = match.group()
    digits = text.lstrip("-")
    if text == "-0" or (len(digits) > 1 and digits[0] == "0"):
        raise PathError(f"index {text[:20]!r} has a leading zero")
    # Checked on the digits before int(): a huge literal is refused without converting it.
    if len(digits) > _MAX_INDEX_DIGITS or int(digits) > MAX_INDEX:
        raise PathError(f"index at offset {pos} is outside ±(2^53 - 1)")
    return int(text), match.end()


def _parse_quoted(path: str, pos: int) -> tuple[str, int]:
    quote = path[pos]
    chars: list[str] = []
    i = pos + 1
    end = len(path)
    while i < end:
        char = path[i]
        if char == quote:
            return "".join(chars), i + 1
        if char == "\\":
            escaped, i = _unescape(path, i + 1, quote=quote)
            chars.append(escaped)
            continue
        if char < " " or "\ud800" <= char <= "\udfff":
            raise PathError(f"unescaped control or surrogate character at offset {i}")
        chars.append(char)
        i += 1
    raise PathError("unterminated quoted name")


def _unescape(path: str, pos: int, *, quote: str) -> tuple[str, int]:
    """The character an escape at `pos` (just after the backslash) stands for, and the next
    offset."""
    code = path[pos:pos + 1]
    if code == quote:
        return quote, pos + 1
    if code in _ESCAPES:
        return _ESCAPES[code], pos + 1
    if code == "u":
        unit = _hex4(path, pos + 1)
        if 0xDC00 <= unit <= 0xDFFF:
            raise PathError(f"lone low surrogate at offset {pos - 1}")
        if 0xD800 <= unit <= 0xDBFF:
            low = _hex4(path, pos + 7) if path.startswith("\\u", pos + 5) else -1
            if not 0xDC00 <= low <= 0xDFFF:
                raise PathError(f"high surrogate without a low one at offset {pos - 1}")
            return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)), pos + 11
        return chr(unit), pos + 5
    raise PathError(f"invalid escape '\\{code}' at offset {pos}")


def _hex4(path: str, pos: int) -> int:
    match = _HEX4.match(path, pos)
    if match is None:
        raise PathError(f"expected four hex digits at offset {pos}")
    return int(match.group(), 16)


def format_path(segments: tuple[Segment, ...]) -> str:
    """The singular path of `segments`: `.name` where a member name allows it, `["..."]`
    otherwise, `[3]` for an index (`parse_path(format_path(s)) == s`)."""
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _NAME.fullmatch(segment):
            parts.append(f".{segment}")
        else:
            parts.append(f"[{json.dumps(segment)}]")
    return "".join(parts)


def resolve(document: Any, path: str) -> Any:
    """Return the single value at `path` in `document`, or raise PathError."""
    value = document
    for segment in parse_path(path):
        value = _step(value, segment)
        if value is _MISSING:
            raise PathError(f"{path[:200]} does not resolve")
    return value


def _step(value: Any, segment: Segment) -> Any:
    if isinstance(segment, int):
        if isinstance(value, list) and -len(value) <= segment < len(value):
            return value[segment]
        return _MISSING
    if isinstance(value, dict):
        return value.get(segment, _MISSING)
    return _MISSING
