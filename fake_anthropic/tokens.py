"""Token estimates and the prompt cache.

The estimator is deliberately crude and fully deterministic: one token per four characters of
compact JSON (`estimate_tokens`). A request's input is cut into segments in the order the real
API caches them — each tool definition, then each system block (a string system prompt is one
segment), then each content block of each message (a string content is one segment) — and
`input_tokens` is the sum of the segments' estimates, so a prefix's count plus the rest's count
is exactly the total.

Prompt caching follows the real accounting: every segment marked with `cache_control` is a
breakpoint; the prefix up to a breakpoint (segments with `cache_control` stripped, keyed by
model) is remembered once seen. The longest remembered prefix is read
(`cache_read_input_tokens`), the part up to the last breakpoint that was not remembered is
written (`cache_creation_input_tokens`), and `input_tokens` is what remains after both. The
real API's minimum cacheable length and its five-minute lifetime are not modelled.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]


def estimate_tokens(obj: object) -> int:
    """ceil(len(compact JSON of `obj`) / 4): sorted keys, no spaces, non-ASCII kept as is."""
    return math.ceil(len(_compact(obj)) / 4)


def _compact(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class _Segment:
    value: object
    breakpoint: bool


def _strip_cache_control(value: object) -> object:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"}
    return value


def _segment(value: object) -> _Segment:
    marked = isinstance(value, dict) and value.get("cache_control") is not None
    return _Segment(_strip_cache_control(value), marked)


def _segments(body: JSON) -> list[_Segment]:
    segments = [_segment(tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, list):
        segments.extend(_segment(block) for block in system)
    elif system:
        segments.append(_Segment(system, False))
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else message
        if isinstance(content, list):
            segments.extend(_segment(block) for block in content)
        else:
            segments.append(_Segment(content, False))
    return segments


def count_input_tokens(body: JSON) -> int:
    """The input tokens of a request: the sum of its segments' estimates (see the module doc)."""
    return sum(estimate_tokens(s.value) for s in _segments(body))


@dataclass(frozen=True)
class InputUsage:
    """How a request's input splits between uncached, cache-written and cache-read tokens."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class PromptCache:
    """Remembered prefixes (hashes), shared by every request to one server; thread-safe."""

    def __init__(self) -> None:
        self._prefixes: set[str] = set()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every prefix."""
        with self._lock:
            self._prefixes.clear()

    def account(self, body: JSON) -> InputUsage:
        """Split the request's input tokens, remembering its breakpoint prefixes."""
        segments = _segments(body)
        texts = [_compact(s.value) for s in segments]  # each serialized once: counted, hashed
        tokens = [math.ceil(len(text) / 4) for text in texts]  # estimate_tokens of each
        total = sum(tokens)
        digest = hashlib.sha256(json.dumps(body.get("model"), default=str).encode())
        breakpoints: list[tuple[str, int]] = []  # (prefix hash, prefix tokens)
        running = 0
        for segment, text, count in zip(segments, texts, tokens, strict=True):
            digest.update(text.encode())
            digest.update(b"\x00")
            running += count
            if segment.breakpoint:
                breakpoints.append((digest.copy().hexdigest(), running))
        if not breakpoints:
            return InputUsage(total, 0, 0)
        with self._lock:
            read = max((n for key, n in breakpoints if key in self._prefixes), default=0)
            self._prefixes.update(key for key, _ in breakpoints)
        created = breakpoints[-1][1] - read
        return InputUsage(total - read - created, created, read)
