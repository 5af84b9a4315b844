"""A pull reader over a JSON body that arrives in chunks: walk the containers you care about,
decode the small values inside them, stop whenever you have enough.

Backends that can answer with very large bodies (a Loki `query_range` page, a Kubernetes list)
are read with it, so memory holds one small value at a time, never the whole body:

    reader = JsonStream(response.iter_bytes(), max_bytes=16 << 20)
    reader.begin_object()
    while (key := reader.next_key()) is not None:
        if key == "values":
            reader.begin_array()
            while reader.next_item():
                ts, line = reader.value()      # one ["<ns>", "<line>"] pair
        else:
            reader.value()                     # decoded and dropped

Values are decoded with the standard library's `json.JSONDecoder.raw_decode`; the reader only
walks the object and array punctuation around them. Any syntax error, a body that ends early,
or more than `max_bytes` raises `JsonStreamError`.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from typing import Any

_WHITESPACE = " \t\n\r"
_COMPACT_AT = 1 << 16


class JsonStreamError(ValueError):
    """The body is not JSON of the expected shape, ended early, or passed the byte bound."""


class JsonStream:
    """Incremental reader over chunks of UTF-8 JSON text."""

    def __init__(self, chunks: Iterable[bytes], *, max_bytes: int) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._max_bytes = max_bytes
        self.bytes_read = 0
        # Per open container: whether the next member is its first (no comma before it).
        self._first: list[bool] = []

    # -- containers -------------------------------------------------------------------------

    def begin_object(self) -> None:
        """Consume `{`; then call `next_key` until it returns None."""
        self._expect("{")
        self._first.append(True)

    def next_key(self) -> str | None:
        """The next member's key (its `:` consumed), or None at the object's `}`."""
        if self._at_close("}"):
            return None
        key = self.value()
        if not isinstance(key, str):
            raise JsonStreamError("an object key is not a string")
        self._expect(":")
        return key

    def begin_array(self) -> None:
        """Consume `[`; then call `next_item` before each element until it returns False."""
        self._expect("[")
        self._first.append(True)

    def next_item(self) -> bool:
        """Whether another element follows (the reader is then at it), False at `]`."""
        return not self._at_close("]")

    def value(self) -> Any:
        """Decode the value at the current position (a whole subtree)."""
        self._skip_ws()
        while True:
            try:
                result, end = self._json.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError:
                if self._eof:
                    raise JsonStreamError("the body is not valid JSON") from None
                self._fill()
                continue
            # A number at the very end of the buffer may continue in the next chunk.
            if end == len(self._buf) and not self._eof:
                self._fill()
                continue
            self._pos = end
            return result

    def finish(self) -> None:
        """Check that nothing but whitespace follows the top-level value."""
        self._skip_ws()
        if self._pos < len(self._buf):
            raise JsonStreamError("the body has text after its JSON value")

    # -- scanning ---------------------------------------------------------------------------

    def _at_close(self, closer: str) -> bool:
        if not self._first:
            raise JsonStreamError("no container is open")
        char = self._peek()
        if char == closer:
            self._pos += 1
            self._first.pop()
            return True
        if self._first[-1]:
            self._first[-1] = False
        elif char == ",":
            self._pos += 1
        else:
            raise JsonStreamError(f"expected ',' or {closer!r}, found {char!r}")
        return False

    def _expect(self, char: str) -> None:
        found = self._peek()
        if found != char:
            raise JsonStreamError(f"expected {char!r}, found {found!r}")
        self._pos += 1

    def _peek(self) -> str:
        self._skip_ws()
        if self._pos >= len(self._buf):
            raise JsonStreamError("the body ended early")
        return self._buf[self._pos]

    def _skip_ws(self) -> None:
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in _WHITESPACE:
                self._pos += 1
            if self._pos < len(self._buf) or self._eof:
                return
            self._fill()

    def _fill(self) -> None:
        if self._pos >= _COMPACT_AT:
            self._buf = self._buf[self._pos:]
            self._pos = 0
        chunk = next(self._chunks, None)
        if chunk is not None:
            self.bytes_read += len(chunk)
            if self.bytes_read > self._max_bytes:
                raise JsonStreamError(f"answered more than {self._max_bytes} bytes (the bound)")
        try:
            self._buf += self._decoder.decode(chunk or b"", final=chunk is None)
            self._eof = chunk is None
        except UnicodeDecodeError:
            raise JsonStreamError("the body is not UTF-8") from None


__all__ = ["JsonStream", "JsonStreamError"]
