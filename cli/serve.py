"""`verity serve`: the HTTP API (uvicorn) over the configured database and broker; the workers
run separately (`verity worker`). `verity serve --embedded` is the whole thing in one process on
the embedded default: a worker thread on `memory://`, the SQLite file, the shipped scenarios,
and a token made for the session and printed in the page's URL."""

from __future__ import annotations

import signal
import socket
import sys
from contextlib import ExitStack
from typing import Annotated, Any

import typer

from cli.runs import TenantOption, tenant_of
from pipeline.config import VeritySettings
from pipeline.errors import ConfigurationError, InputError
from pipeline.tokens import hash_secret, new_secret, new_token_id


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
    embedded: Annotated[bool, typer.Option(
        "--embedded", help="Run the runs in this process too (a worker thread on memory://, "
        "the SQLite file) and print the page's URL with a token for this session.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Serve the HTTP API and the page: enqueue runs for the workers, stream their events,
    read them."""
    settings = VeritySettings()
    if embedded and settings.broker_url:
        raise ConfigurationError("--embedded runs its own worker on memory://: unset "
                                 "VERITY_BROKER_URL (or serve without --embedded)")
    if not embedded and not settings.broker_url:
        raise ConfigurationError("verity serve enqueues for separate workers: set "
                                 "VERITY_BROKER_URL and VERITY_DATABASE_URL, or use "
                                 "verity serve --embedded")
    if not 0 <= port <= 65535:
        raise InputError("--port must be between 0 and 65535")
    owner = tenant_of(tenant)
    import uvicorn

    from api import ApiSettings, create_app
    from api.server import server_config
    from api.settings import with_broker_redis
    from client import VerityClient
    from pipeline.config import check_settings
    from tasks.services import runtime_from

    check_settings(settings)
    listener = _listen(host, port)
    with ExitStack() as stack:
        runtime = runtime_from(settings)
        stack.callback(runtime.store.close)
        secret = None
        if embedded:
            from tasks.embedded import embedded_worker

            stack.enter_context(embedded_worker(runtime, join_timeout=0.2))
            secret = _session_token(stack, runtime.store, tenant=owner)
        api_settings = with_broker_redis(ApiSettings(), settings.broker_url)
        app = create_app(lambda t: VerityClient(runtime, tenant=t), api_settings)
        config = server_config(app, api_settings, log_level=log_level, proxy_headers=False,
                               server_header=False, timeout_graceful_shutdown=3)
        _announce(listener, secret=secret, tenant=owner)
        # uvicorn re-raises the SIGTERM it stopped on: exit through the stack, which revokes
        # the session's token and stops the worker
        signal.signal(signal.SIGTERM, _exit)
        uvicorn.Server(config).run(sockets=[listener])


def _exit(signum: int, _: object) -> None:
    raise SystemExit(128 + signum)


def _listen(host: str, port: int) -> socket.socket:
    """The bound listening socket (so a port of 0 is known before uvicorn starts)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it a kept-alive response waits ~40 ms (Nagle against the client's delayed ACK)
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    listener.listen(2048)
    return listener


def _session_token(stack: ExitStack, store: Any, *, tenant: str) -> str:
    """A token of `tenant` for this server's life (revoked when it stops); its secret."""
    secret = new_secret()
    token = store.create_token(token_id=new_token_id(), tenant_id=tenant, name="serve-embedded",
                               secret_sha256=hash_secret(secret))
    stack.callback(store.revoke_token, token.token_id)
    return secret


def _announce(listener: socket.socket, *, secret: str | None, tenant: str) -> None:
    """Print where the page is (listening already: a request now waits for the app)."""
    host, port = listener.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/"
    if secret is None:
        sys.stdout.write(f"Verity on {url} (OpenAPI at {url}openapi.json)\n")
    else:
        sys.stdout.write(f"Verity on {url}#token={secret}\n"
                         f"(embedded: runs execute in this process; the token acts as tenant "
                         f"{tenant} until the server stops)\n")
    sys.stdout.flush()
