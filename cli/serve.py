"""`verity serve`: the HTTP API (uvicorn) over the configured database and broker; the workers
run separately (`verity worker`)."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline.config import VeritySettings
from pipeline.errors import ConfigurationError, InputError


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level.")] = "info",
) -> None:
    """Serve the HTTP API: enqueue runs for the workers, stream their events, read them."""
    settings = VeritySettings()
    if not settings.broker_url:
        raise ConfigurationError("verity serve enqueues for separate workers: set "
                                 "VERITY_BROKER_URL and VERITY_DATABASE_URL")
    if not 0 <= port <= 65535:
        raise InputError("--port must be between 0 and 65535")
    import uvicorn

    from api import ApiSettings, create_app
    from tasks.client import VerityClient, check_settings
    from tasks.services import runtime_from

    check_settings(settings)
    api_settings = ApiSettings()
    runtime = runtime_from(settings)
    try:
        app = create_app(lambda tenant: VerityClient(runtime, tenant=tenant), api_settings)
        uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False,
                    server_header=False, timeout_graceful_shutdown=3)
    finally:
        runtime.close()
