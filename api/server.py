"""How the API runs under uvicorn (`verity serve`, and the tests that serve it): h11 with a
bound on the request's head, and the refusals uvicorn answers itself in the API's shape.

uvicorn answers a request it cannot parse (a NUL in a header, a head past the bound) before the
app sees it, with a plain-text 400. `JsonRefusals` answers it as every other error is answered:
`{"error": "<one line>"}` with the security headers, then closes the connection. The head (the
request line and headers) is bounded at `max_head_bytes` twice over: h11's
`max_incomplete_event_size` refuses a head still incomplete past it (the rest is never read),
and `BoundedHead` one that arrived whole in a single read; either is a 431. (httptools,
uvicorn's choice when it is installed, reads a head of any size whole.)
"""

from __future__ import annotations

import sys
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from api.errors import error_body
from api.headers import SECURITY_HEADERS
from api.settings import ApiSettings

DEFAULT_HEAD_BYTES = 16 * 1024


class BoundedHead(h11.Connection):
    """An h11 server connection whose requests' heads are at most `max_head_bytes`, complete
    (checked here) or not (h11 checks that only while it waits for the rest)."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes

    def next_event(self) -> Any:
        """h11's next event; RemoteProtocolError (431) for a request above the bound."""
        event = super().next_event()
        if isinstance(event, h11.Request):
            size = len(event.method) + len(event.target) + sum(
                len(name) + len(value) + 4 for name, value in event.headers)
            if size > self.max_head_bytes:
                raise h11.RemoteProtocolError("request head too long", error_status_hint=431)
        return event


class JsonRefusals(H11Protocol):
    """uvicorn's h11 protocol with bounded heads, whose own refusals are the API's JSON
    errors."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.conn = BoundedHead(config.h11_max_incomplete_event_size or DEFAULT_HEAD_BYTES)

    def send_400_response(self, msg: str) -> None:
        """Refuse the request h11 could not parse, and close the connection."""
        del msg  # uvicorn's text: "Invalid HTTP request received."
        # uvicorn calls this from its `except h11.RemoteProtocolError`: h11's hint says which
        error = sys.exc_info()[1]
        too_large = isinstance(error, h11.RemoteProtocolError) and error.error_status_hint == 431
        status = 431 if too_large else 400
        body = error_body(
            f"request line and headers above {self.config.h11_max_incomplete_event_size} bytes"
            if too_large else "malformed HTTP request")
        headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                   (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]
        reason = HTTPStatus(status).phrase.encode()
        for event in (h11.Response(status_code=status, headers=headers, reason=reason),
                      h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()


def server_config(app: ASGIApp, settings: ApiSettings, **options: Any) -> uvicorn.Config:
    """uvicorn's Config for the API: h11 refusing heads above `settings.max_head_bytes`, every
    refusal in the API's error shape; `options` as uvicorn.Config takes them."""
    return uvicorn.Config(app, http=JsonRefusals,
                          h11_max_incomplete_event_size=settings.max_head_bytes, **options)
