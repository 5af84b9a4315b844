"""The ASGI app of `verity serve`: it only enqueues and reads, through `VerityClient`; the
workers run the runs.

    app = create_app(lambda tenant: VerityClient(runtime, tenant=tenant), ApiSettings())

`client_factory(tenant)` makes the producer client a request of that tenant acts through (one
per tenant, kept); API tokens are looked up in that client's store.

Every response carries the security headers (`api.headers`). There is no `/docs` page:
Swagger UI would come from a CDN, and the page promises nothing from one; `/openapi.json` is
the document any OpenAPI viewer reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors, routes
from api.auth import limiter_for
from api.deps import ApiState, ClientFactory
from api.headers import SecurityHeaders
from api.hooks import hooks
from api.metrics import metrics_router
from api.settings import ApiSettings
from api.sources import document_sources
from api.sse import FeedHub
from models.run import DEFAULT_TENANT
from pipeline.config import VeritySettings


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


class VerityApp(FastAPI):
    """FastAPI with SecurityHeaders outside everything, Starlette's error middleware too (its
    500s carry them)."""

    def build_middleware_stack(self) -> ASGIApp:
        """The app's stack, wrapped."""
        return SecurityHeaders(super().build_middleware_stack())


def create_app(client_factory: ClientFactory, settings: ApiSettings | None = None) -> FastAPI:
    """The API over the producer clients `client_factory` makes, one per tenant; its rate
    limits in `settings.redis_url` when set (shared by every replica), else in this process."""
    chosen = settings or ApiSettings()
    state = ApiState(client_factory=client_factory, settings=chosen,
                     tokens=client_factory(DEFAULT_TENANT),
                     limiter=limiter_for(chosen.runs_per_minute, chosen.redis_url),
                     hub=FeedHub(poll_s=chosen.poll_s, keepalive_s=chosen.keepalive_s))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            started = anyio.Event()
            group.start_soon(state.hub.run, started.set)
            await started.wait()
            yield
            group.cancel_scope.cancel()
        state.limiter.close()

    app = VerityApp(title="Verity", version="1", lifespan=lifespan, docs_url=None,
                    redoc_url=None, description="Evidence-grounded incident diagnosis: "
                    "enqueue runs, follow their events, read their answers.")
    app.state.verity = state
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document_sources(generate())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    errors.install(app)
    for router in (routes.public, routes.router, routes.metered, hooks):
        app.include_router(router)
    app.include_router(metrics_router(public=chosen.metrics_public,
                                      broker_url=VeritySettings().broker_url))
    app.add_middleware(BodyLimit, max_bytes=chosen.max_body_bytes)
    app.add_middleware(NoNul)
    app.mount("/", StaticFiles(directory=str(files("api") / "static"), html=True),
              name="static")
    return app
