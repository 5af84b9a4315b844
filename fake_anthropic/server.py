"""`FakeAnthropic`: the fake Messages API server in this process, on a free 127.0.0.1 port.

    with FakeAnthropic(latency=0.0) as fake:
        fake.script("verifier", [{"tool_use": {"name": "submit_verifier_output", "input": {...}}}])
        fake.fault("executor", "429", retry_after=2)
        client = anthropic.Anthropic(api_key="test", base_url=fake.base_url, max_retries=0)
        ...
        fake.requests  # every request, in order
        fake.batches   # every Message Batch, with the requests in it (see `batches`)

`FakeAnthropic.spawn(...)` runs the same server as a separate process (for workers and
benchmarks) and returns a handle with the same control methods, spoken over HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from fake_anthropic.batches import DEFAULT_BATCH_DELAY
from fake_anthropic.control import FaultQueueing, as_replies
from fake_anthropic.handler import FakeServer
from fake_anthropic.process import SpawnedFake, spawn
from fake_anthropic.responders import Responder, load_responder
from fake_anthropic.state import FakeState
from fake_anthropic.tokens import JSON

if TYPE_CHECKING:
    from pathlib import Path


class FakeAnthropic(FaultQueueing):
    """The fake server in a background thread; its Python methods mirror the control API."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        role_latency: Mapping[str, float] | None = None,
        required_key: str | None = None,
        default_responder: Responder | str | None = None,
        hang_seconds: float = 30.0,
        seed: int | None = None,
        script: Mapping[str, Any] | None = None,
        record_limit: int | None = None,
        batch_delay: float = DEFAULT_BATCH_DELAY,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """`script` is a script document applied at start and again by every `reset()`;
        `record_limit` keeps only the latest requests and batches (None: all, fine for tests;
        set it for long benchmarks); `batch_delay` is how long a Message Batch stays in_progress."""
        responder = (
            load_responder(default_responder)
            if isinstance(default_responder, str)
            else default_responder
        )
        self.state = FakeState(
            latency=latency,
            role_latency=role_latency,
            required_key=required_key,
            default_responder=responder,
            hang_seconds=hang_seconds,
            seed=seed,
            script=script,
            record_limit=record_limit,
            batch_delay=batch_delay,
        )
        self._address = (host, port)
        self._server: FakeServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        """Bind and serve in a daemon thread; returns self."""
        if self._server is not None:
            raise RuntimeError("the fake server is already running")
        self.state.stopping.clear()
        self._server = FakeServer(self._address, self.state)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-anthropic:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: waits end early, open connections close, every thread is joined."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self.state.stopping.set()
        server.shutdown()
        server.server_close()
        server.close_connections()
        thread.join()
        self._server = self._thread = None

    def serve_until(self, stop: threading.Event) -> None:
        """Serve until `stop` is set (the command line's main loop), then stop."""
        try:
            while not stop.wait(0.5):
                pass
        finally:
            self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (the server must be started)."""
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`, what `ANTHROPIC_BASE_URL` or `base_url=` takes."""
        return f"http://{self._address[0]}:{self.port}"

    # -- control (mirrors /_control/...) -------------------------------------------------

    def script(self, role: str, replies: object) -> int:
        """Queue one reply or a list of replies for `role`; the queue's new length."""
        return self.state.script(role, as_replies(replies))

    def faults(self, role: str, specs: Sequence[object]) -> int:
        """Queue fault specifications (names or `{"fault": ...}` objects) for `role`."""
        return self.state.fault(role, list(specs))

    def set_latency(self, seconds: float, role: str | None = None) -> None:
        """Seconds to wait before answering, for one role or (role None) every role."""
        self.state.set_latency(seconds, role)

    def set_default_responder(
        self, responder: Responder | str | None, role: str | None = None
    ) -> None:
        """What answers when a role's queue is empty: a callable, a dotted path, or None."""
        loaded = load_responder(responder) if isinstance(responder, str) else responder
        self.state.set_default_responder(loaded, role)

    def load(self, document: Mapping[str, Any]) -> None:
        """Apply a script document (the `--script FILE` format)."""
        self.state.load(document)

    def set_batch_delay(self, seconds: float) -> None:
        """Seconds a new Message Batch stays in_progress before it ends."""
        self.state.batches.set_delay(seconds)

    @property
    def batches(self) -> list[JSON]:
        """Every Message Batch as the API shows it, oldest first, each with `requests`: the
        record of every request in it (see `fake_anthropic.batches`)."""
        return self.state.batches.snapshot()

    def batch_requests(self, role: str | None = None) -> list[JSON]:
        """The records of the requests inside every batch, optionally of one role."""
        return self.state.batch_requests(role)

    @property
    def requests(self) -> list[JSON]:
        """Every recorded request, in arrival order."""
        return self.state.requests()

    def requests_for(self, role: str) -> list[JSON]:
        """The recorded requests of one role, in arrival order."""
        return self.state.requests(role)

    def pending(self) -> JSON:
        """Replies and faults still queued, per role."""
        return self.state.pending()

    def reset(self) -> None:
        """Forget requests, queues and cached prefixes; re-apply the start configuration."""
        self.state.reset()

    # -- another process -----------------------------------------------------------------

    @staticmethod
    def spawn(
        *,
        latency: float | None = None,
        role_latency: Mapping[str, float] | None = None,
        script: Path | str | Mapping[str, Any] | None = None,
        required_key: str | None = None,
        default_responder: str | None = None,
        hang_seconds: float = 30.0,
        record_limit: int | None = None,
        batch_delay: float | None = None,
        startup_timeout: float = 10.0,
    ) -> SpawnedFake:
        """Run the server as `python -m fake_anthropic` in a child process (see `process`).

        `latency` (None: the script's, else 0) and the other settings are its start
        configuration; `default_responder` is `[role=]module:function` or `minimal`."""
        return spawn(
            latency=latency,
            role_latency=role_latency,
            script=script,
            required_key=required_key,
            default_responder=default_responder,
            hang_seconds=hang_seconds,
            record_limit=record_limit,
            batch_delay=batch_delay,
            startup_timeout=startup_timeout,
        )
