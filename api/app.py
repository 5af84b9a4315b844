"""The ASGI app of `verity serve`: it only enqueues and reads, through `VerityClient`; the
workers run the runs.

    app = create_app(lambda tenant: VerityClient(runtime, tenant=tenant), ApiSettings())

`client_factory(tenant)` makes the producer client a request of that tenant acts through (one
per tenant, kept); API tokens are looked up in that client's store.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors
from api.auth import RateLimiter, Unauthorized, authenticate
from api.settings import ApiSettings
from api.sources import document_sources
from api.sse import FeedHub
from client import VerityClient
from models.run import DEFAULT_TENANT
from models.token import ApiToken

ClientFactory = Callable[[str], VerityClient]


@dataclass(eq=False)
class ApiState:
    """What every request shares: the clients per tenant, the limiter and the feeds."""

    client_factory: ClientFactory
    settings: ApiSettings
    tokens: VerityClient
    limiter: RateLimiter
    hub: FeedHub
    _clients: dict[str, VerityClient] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, tenant: str) -> VerityClient:
        """The tenant's producer client (made once)."""
        with self._lock:
            found = self._clients.get(tenant)
            if found is None:
                found = self._clients[tenant] = self.client_factory(tenant)
            return found


@dataclass(frozen=True)
class Caller:
    """An authenticated request: its token and its tenant's client."""

    token: ApiToken
    client: VerityClient


_bearer = HTTPBearer(auto_error=False, description="An API token: `verity tokens create`.")


def state_of(request: Request) -> ApiState:
    """The app's shared state."""
    found: ApiState = request.app.state.verity
    return found


BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
"""The request's bearer credentials, not yet checked (no store read): for an endpoint that
authenticates with `caller_of` in the same worker thread as its own blocking work."""


def caller_of(state: ApiState, credentials: HTTPAuthorizationCredentials | None) -> Caller:
    """The caller the credentials name (401 without a live token) and its tenant's client.
    Blocking (a store read): call it from a worker thread."""
    if credentials is None:
        raise Unauthorized("missing bearer token: send Authorization: Bearer <token>")
    header = f"Bearer {credentials.credentials}"
    token = authenticate(header, state.tokens.runtime.store.token_by_secret_hash)
    return Caller(token=token, client=state.client(token.tenant_id))


def caller(request: Request, credentials: BearerDep) -> Caller:
    """The request's token (401 without a live one) and its tenant's client."""
    return caller_of(state_of(request), credentials)


CallerDep = Annotated[Caller, Depends(caller)]
"""The authenticated caller of an endpoint."""


class BodyLimit:
    """413 for a body above `max_bytes`: by Content-Length before the app runs, else while it
    is read."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            response = errors.error_response(413, f"request body above {self.max_bytes} bytes")
            await response(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, f"request body above {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)


class NoNul:
    """422 for a path or query string with a NUL character (%00): no store column holds one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"]
                                        or b"%00" in scope.get("query_string", b"")):
            response = errors.error_response(422, "NUL characters are not allowed in a URL")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_app(client_factory: ClientFactory, settings: ApiSettings | None = None) -> FastAPI:
    """The API over the producer clients `client_factory` makes, one per tenant."""
    from api import routes

    chosen = settings or ApiSettings()
    state = ApiState(client_factory=client_factory, settings=chosen,
                     tokens=client_factory(DEFAULT_TENANT),
                     limiter=RateLimiter(chosen.runs_per_minute),
                     hub=FeedHub(poll_s=chosen.poll_s, keepalive_s=chosen.keepalive_s))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            started = anyio.Event()
            group.start_soon(state.hub.run, started.set)
            await started.wait()
            yield
            group.cancel_scope.cancel()

    app = FastAPI(title="Verity", version="1", lifespan=lifespan,
                  description="Evidence-grounded incident diagnosis: enqueue runs, follow "
                  "their events, read their answers.")
    app.state.verity = state
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document_sources(generate())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    errors.install(app)
    app.include_router(routes.router)
    app.add_middleware(BodyLimit, max_bytes=chosen.max_body_bytes)
    app.add_middleware(NoNul)
    app.mount("/", StaticFiles(directory=str(files("api") / "static"), html=True),
              name="static")
    return app
