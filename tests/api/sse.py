"""A small SSE reader for the tests: frames as (event, id, data) from an httpx stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Frame:
    """One SSE frame; a comment (`: ping`) has event `comment`."""

    event: str
    id: str | None
    data: Any


def frames(response: httpx.Response) -> Iterator[Frame]:
    """The frames of a streaming response, as they arrive."""
    event, ident, data = "message", None, []
    for line in response.iter_lines():
        if line.startswith(":"):
            yield Frame("comment", None, line[1:].strip())
        elif not line:
            if data:
                yield Frame(event, ident, json.loads("\n".join(data)))
            event, ident, data = "message", None, []
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "id":
                ident = value
            elif name == "data":
                data.append(value)
