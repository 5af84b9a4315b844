"""The producer API, in two forms with the same methods, return types and errors:

    from client import VerityClient          # in process: the store, and Celery to send
    client = VerityClient.from_env(tenant="team-payments")
    client = VerityClient.from_url("http://127.0.0.1:8000", token=secret)   # over verity serve

`client.local` holds `VerityClient` (it sends through `tasks.producer`); `client.http` holds
`HttpVerityClient`, which imports neither Celery nor the store. Importing this package imports
neither until one of them is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from client.wait import RunTimeoutError, wait_for_end

if TYPE_CHECKING:
    from client.http import HttpVerityClient
    from client.local import VerityClient

__all__ = ["HttpVerityClient", "RunTimeoutError", "VerityClient", "wait_for_end"]


def __getattr__(name: str) -> Any:
    # lazy, so that `client.http` stays free of Celery
    if name == "VerityClient":
        from client.local import VerityClient

        return VerityClient
    if name == "HttpVerityClient":
        from client.http import HttpVerityClient

        return HttpVerityClient
    raise AttributeError(f"module 'client' has no attribute {name!r}")
