"""Every error the API answers, as `{"error": "<one line>"}`: never a stack trace or internal
text (those go to the log). Status by error type, never by message."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from api.auth import RateLimited, Unauthorized
from pipeline.errors import (
    BatchNotFoundError,
    BrokerUnavailableError,
    ConfigurationError,
    InputError,
    RunNotFoundError,
    StoreError,
    StoreUnavailableError,
    VerityError,
)

logger = logging.getLogger("api")

MAX_MESSAGE = 300


def error_body(message: str) -> bytes:
    """The one error body, `{"error": "<one line>"}`: the first line of `message`, bounded."""
    line = (message.strip().splitlines() or ["error"])[0][:MAX_MESSAGE]
    return json.dumps({"error": line}, ensure_ascii=False, separators=(",", ":")).encode()


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None
                   ) -> Response:
    """The one error body as a response."""
    return Response(error_body(message), status_code=status, media_type="application/json",
                    headers=dict(headers) if headers else None)


def _validation(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if not errors:
        return error_response(422, "invalid request")
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    return error_response(422, f"{where or 'body'}: {first.get('msg', 'invalid')}")


def _http(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail), headers=exc.headers)


def _unauthorized(_: Request, exc: Exception) -> Response:
    return error_response(401, str(exc), headers={"www-authenticate": "Bearer"})


def _rate_limited(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RateLimited)
    return error_response(429, str(exc), headers={"retry-after": str(exc.retry_after_s)})


def _unavailable(what: str) -> Callable[[Request, Exception], Response]:
    def handle(request: Request, exc: Exception) -> Response:
        logger.warning("%s %s: %s", request.method, request.url.path, exc)
        return error_response(503, f"{what} unavailable: retry later",
                              headers={"retry-after": "1"})
    return handle


def _verity(status: int) -> Callable[[Request, Exception], Response]:
    def handle(_: Request, exc: Exception) -> Response:
        return error_response(status, str(exc))
    return handle


def _internal(request: Request, exc: Exception) -> Response:
    logger.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal error")


Handler = Callable[[Request, Exception], Response | Awaitable[Response]]
HANDLERS: list[tuple[type[Exception], Handler]] = [
    (RequestValidationError, _validation),
    (HTTPException, _http),
    (Unauthorized, _unauthorized),
    (RateLimited, _rate_limited),
    (RunNotFoundError, _verity(404)),
    (BatchNotFoundError, _verity(404)),
    (StoreUnavailableError, _unavailable("database")),
    (BrokerUnavailableError, _unavailable("broker")),
    (InputError, _verity(422)),
    (ConfigurationError, _verity(422)),
    (StoreError, _verity(409)),
    (VerityError, _internal),
    (Exception, _internal),
]
"""Most specific first; Starlette picks by the exception's MRO either way."""


def install(app: FastAPI) -> None:
    """Register every handler on `app`."""
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)
