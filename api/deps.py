"""What every request shares and the FastAPI dependencies that read it: the app's state (the
producer clients per tenant, the limiter and the feeds) and the authenticated caller. `app`
builds the state, `routes` depends on it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.auth import RateLimiter, Unauthorized, authenticate
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
