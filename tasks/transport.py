"""kombu's Redis transport with one client per channel for its short commands.

kombu's Redis channel builds a new `redis.Redis` object for every short command it runs
outside its polling client (each ack, each delivered message's bookkeeping, each event
published to a fanout exchange). The object is a thin handle on the channel's connection pool,
but building one costs more than the command it sends (about a tenth of a busy worker's time
in `bench/llm_concurrency.py`). A `redis.Redis` is safe to share between threads: each command
borrows a connection from the pool, and pipelines are built per use. So the channel keeps one,
rebuilt only when its pool is replaced (after a disconnect). Everything else is kombu's.

`install()` (called by `tasks.app`) makes it the transport of `redis://` URLs, which keep their
scheme for Flower and `as_uri()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu import transport as kombu_transports
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    """The Redis channel, reusing one synchronous client for short commands."""

    _command_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        command_client = self._command_client
        if command_client is None or command_client.connection_pool is not self.pool:
            command_client = self._command_client = self._create_client()  # type: ignore[no-untyped-call]
        yield command_client


class Transport(kombu_redis.Transport):
    """The Redis transport with `Channel` above."""

    Channel = Channel


def install() -> None:
    """Serve `redis://` broker URLs with `Transport` in this process."""
    kombu_transports.TRANSPORT_ALIASES["redis"] = f"{__name__}:Transport"
