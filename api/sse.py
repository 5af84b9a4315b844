"""Server-sent events of runs: one shared poller per followed run, and the streaming response.

A `Feed` reads its run's new events and status with one indexed statement per tick
(`VerityClient.follow`), however many clients follow the run: 200 followers cost one query per
`poll_s`. Each follower keeps its own cursor into the feed's events, so a follower resuming at
`Last-Event-ID: 17` gets 18, 19 ... with no gap and no repeat. When a read finds the run
terminal, the feed reads once more (a late event a worker wrote after the end still goes out),
then every follower gets its remaining events and a final `end` event.

`EventStream` watches the ASGI receive channel while it streams: a client that goes away is
seen at once (not at the next write), and the creating request's `on_disconnect` runs then.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from client import VerityClient
from models.common import RunStatus
from models.run import RunEvent
from pipeline.errors import StoreError, StoreUnavailableError, VerityError

logger = logging.getLogger(__name__)

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def event_frame(event: RunEvent) -> bytes:
    """One run_event as an SSE frame whose id is the event's seq."""
    return f"id: {event.seq}\nevent: run_event\ndata: {event.model_dump_json()}\n\n".encode()


def named_frame(name: str, data: dict[str, Any]) -> bytes:
    """A frame without an id (a reconnecting client's Last-Event-ID stays the last event's)."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


PING = b": ping\n\n"


@dataclass(eq=False)
class Feed:
    """One run's events as read so far, and whether the run has ended."""

    client: VerityClient
    run_id: str
    events: list[RunEvent] = field(default_factory=list)
    status: RunStatus | None = None
    ended: bool = False
    error: VerityError | None = None
    followers: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def last_seq(self) -> int:
        """The seq of the last event read (0 before any)."""
        return self.events[-1].seq if self.events else 0

    def after(self, seq: int) -> list[RunEvent]:
        """The events read with a seq above `seq`."""
        start = bisect.bisect_right([e.seq for e in self.events], seq)
        return self.events[start:]

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def poll(self, every_s: float) -> None:
        """Read while anyone follows, until the run has ended (one more read after a terminal
        status) or is gone; a database that does not answer is read again next tick."""
        terminal_reads = 0
        while terminal_reads < 2 and self.followers > 0:
            try:
                status, fresh = await anyio.to_thread.run_sync(
                    lambda: self.client.follow(self.run_id, after=self.last_seq),
                    abandon_on_cancel=True)
            except StoreUnavailableError as exc:
                logger.warning("run %s not read: %s", self.run_id, exc)
                await anyio.sleep(every_s)
                continue
            self.status = status
            self.events.extend(fresh)
            terminal_reads = terminal_reads + 1 if status.terminal else 0
            if fresh:
                self._notify()
            if terminal_reads < 2:
                await anyio.sleep(every_s)
        self.ended = terminal_reads >= 2
        self._notify()

    def fail(self, error: VerityError) -> None:
        """End the feed with an error its followers are told in one line."""
        self.error = error
        self._notify()


class FeedHub:
    """The feeds of the runs being followed, each polled while it has a follower."""

    def __init__(self, *, poll_s: float, keepalive_s: float) -> None:
        self.poll_s = poll_s
        self.keepalive_s = keepalive_s
        self._feeds: dict[tuple[str, str], Feed] = {}
        self._group: TaskGroup | None = None

    async def run(self, started: Callable[[], None] | None = None) -> None:
        """Host the pollers until cancelled (the app's lifespan runs it)."""
        async with anyio.create_task_group() as group:
            self._group = group
            if started is not None:
                started()
            await anyio.sleep_forever()

    def _join(self, client: VerityClient, run_id: str) -> Feed:
        key = (client.tenant, run_id)
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = Feed(client=client, run_id=run_id)
            assert self._group is not None, "FeedHub.run is not running"
            self._group.start_soon(self._poll, key, feed)
        feed.followers += 1
        return feed

    async def _poll(self, key: tuple[str, str], feed: Feed) -> None:
        try:
            await feed.poll(self.poll_s)
        except StoreError as exc:  # the run is gone
            feed.fail(exc)
        except Exception:  # a poller's failure must not end the hub
            logger.exception("following run %s failed", feed.run_id)
            feed.fail(VerityError("the run's events could not be read"))
        finally:
            if self._feeds.get(key) is feed:
                del self._feeds[key]

    def _leave(self, feed: Feed) -> None:
        feed.followers -= 1

    @property
    def followed(self) -> int:
        """Runs being polled now."""
        return len(self._feeds)

    async def frames(self, client: VerityClient, run_id: str, *, after: int
                     ) -> AsyncGenerator[bytes, None]:
        """The run's SSE frames: its events with seq > after as they are written, keep-alive
        comments while none come, and an `end` frame once it has ended."""
        feed = self._join(client, run_id)
        cursor = after
        try:
            while True:
                waiter = feed.changed  # taken before reading: no wake-up is missed
                for event in feed.after(cursor):
                    cursor = event.seq
                    yield event_frame(event)
                if feed.error is not None:
                    yield named_frame("error", {"error": str(feed.error).splitlines()[0]})
                    return
                if feed.ended:
                    status = feed.status.value if feed.status else None
                    yield named_frame("end", {"run_id": run_id, "status": status,
                                              "last_seq": cursor})
                    return
                with anyio.move_on_after(self.keepalive_s) as idle:
                    await waiter.wait()
                if idle.cancelled_caught:
                    yield PING
        finally:
            self._leave(feed)


class EventStream(Response):
    """A `text/event-stream` response that notices a client going away from the receive
    channel, cancels the stream and then awaits `on_disconnect` (shielded)."""

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncGenerator[bytes, None], *, status_code: int = 200,
                 headers: dict[str, str] | None = None,
                 on_disconnect: Callable[[], Awaitable[None]] | None = None) -> None:
        self.frames = frames
        self.status_code = status_code
        self.background = None
        self.init_headers({**SSE_HEADERS, **(headers or {})})
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        gone = False
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                group.cancel_scope.cancel()

            group.start_soon(watch)
            try:
                async with aclosing(self.frames) as frames:
                    async for frame in frames:
                        await send({"type": "http.response.body", "body": frame,
                                    "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:  # the write failed: the client is gone
                gone = True
            group.cancel_scope.cancel()
        if gone and self.on_disconnect is not None:
            with anyio.CancelScope(shield=True):
                await self.on_disconnect()
