"""What every request shares and the door every authenticated request comes through.

`ApiState` is the app's state (the producer clients per tenant, the limiter and the feeds).
`Authenticated` routes check the bearer token before anything of the request is read: a
missing, unknown or revoked token is the 401 whatever the query or body, so an unauthenticated
caller learns nothing of the schema. `Metered` routes (those that create runs) then read the
body (bounded: 413 spends nothing, it was never judged) and spend one from the token's rate
budget before the body is parsed and validated: a body refused as 422 costs what an accepted
one does (judging it is work, and a loop of bad bodies is throttled like a loop of runs), and a
429 is answered before any parsing. `app` builds the state, `routes` depends on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.auth import Limiter, Unauthorized, authenticate
from api.settings import ApiSettings
from api.sse import FeedHub
from client import VerityClient
from models.token import ApiToken

ClientFactory = Callable[[str], VerityClient]


@dataclass(eq=False)
class ApiState:
    """What every request shares: the clients per tenant, the limiter and the feeds."""

    client_factory: ClientFactory
    settings: ApiSettings
    tokens: VerityClient
    limiter: Limiter
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
"""The request's bearer credentials, not yet checked (no store read); through `caller`, it
names the scheme in the OpenAPI of every authenticated endpoint."""


def caller_of(state: ApiState, credentials: HTTPAuthorizationCredentials | None) -> Caller:
    """The caller the credentials name (401 without a live token) and its tenant's client.
    Blocking (a store read): call it from a worker thread."""
    if credentials is None:
        raise Unauthorized("missing bearer token: send Authorization: Bearer <token>")
    header = f"Bearer {credentials.credentials}"
    token = authenticate(header, state.tokens.runtime.store.token_by_secret_hash)
    return Caller(token=token, client=state.client(token.tenant_id))


async def caller(request: Request, credentials: BearerDep) -> Caller:
    """The request's token (401 without a live one) and its tenant's client: the one its
    `Authenticated` route found."""
    found = getattr(request.state, "caller", None)
    if isinstance(found, Caller):
        return found
    return await run_in_threadpool(caller_of, state_of(request), credentials)


CallerDep = Annotated[Caller, Depends(caller)]
"""The authenticated caller of an endpoint."""

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class Authenticated(APIRoute):
    """A route whose caller is authenticated before its parameters and body are read."""

    metered = False
    """Spend one from the token's rate budget, once the body is read and before it is parsed."""

    def get_route_handler(self) -> Handler:
        """The endpoint's handler behind the door."""
        handle = super().get_route_handler()
        metered = self.metered

        async def guarded(request: Request) -> Response:
            state = state_of(request)
            credentials = await _bearer(request)
            who = await run_in_threadpool(caller_of, state, credentials)
            request.state.caller = who
            if metered:
                await request.body()  # read once, bounded (BodyLimit); parsed by `handle`
                await run_in_threadpool(state.limiter.take, who.token.token_id)
            return await handle(request)

        return guarded


class Metered(Authenticated):
    """An authenticated route that creates runs: each request spends from the token's budget."""

    metered = True
