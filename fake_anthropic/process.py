"""The fake server in another process, and control of any running fake over HTTP.

`spawn()` starts `python -m fake_anthropic --port 0 ...`, reads its `listening on URL` line and
returns a `SpawnedFake`: a `FakeControl` (the control API spoken over HTTP, method for method
like `FakeAnthropic`) that also owns the child process and ends it on `stop()`.
"""

from __future__ import annotations

import http.client
import json
import select
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote, urlsplit

from fake_anthropic.control import FaultQueueing, as_replies
from fake_anthropic.tokens import JSON


class FakeControlError(RuntimeError):
    """The fake's control API refused a request (a bad reply or fault specification)."""


class FakeControl(FaultQueueing):
    """The control API of a fake server at `base_url` (plain http.client: no proxies)."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        self.base_url = base_url.rstrip("/")
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._timeout = timeout

    def _call(self, method: str, path: str, payload: object = None) -> JSON:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            body = None if payload is None else json.dumps(payload).encode()
            headers = {"content-type": "application/json"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            answer: JSON = json.loads(response.read() or b"{}")
        finally:
            connection.close()
        if response.status != 200:
            raise FakeControlError(str(answer.get("error", answer)))
        return answer

    def script(self, role: str, replies: object) -> int:
        """Queue one reply or a list of replies for `role`; the queue's new length."""
        payload = {"role": role, "replies": as_replies(replies)}
        return int(self._call("POST", "/_control/script", payload)["queued"])

    def faults(self, role: str, specs: Sequence[object]) -> int:
        """Queue fault specifications for `role`; the queue's new length."""
        payload = {"role": role, "faults": list(specs)}
        return int(self._call("POST", "/_control/faults", payload)["queued"])

    def set_latency(self, seconds: float, role: str | None = None) -> None:
        """Seconds to wait before answering, for one role or (role None) every role."""
        self._call("POST", "/_control/latency", {"seconds": seconds, "role": role})

    def set_default_responder(self, responder: str | None, role: str | None = None) -> None:
        """The responder by dotted path (`module:function`), `minimal`, or None."""
        self._call("POST", "/_control/responder", {"responder": responder, "role": role})

    def load(self, document: Mapping[str, Any]) -> None:
        """Apply a script document (the `--script FILE` format)."""
        self._call("POST", "/_control/load", dict(document))

    @property
    def requests(self) -> list[JSON]:
        """Every recorded request, in arrival order."""
        return list(self._call("GET", "/_control/requests")["requests"])

    def requests_for(self, role: str) -> list[JSON]:
        """The recorded requests of one role, in arrival order."""
        return list(self._call("GET", f"/_control/requests?role={quote(role)}")["requests"])

    def pending(self) -> JSON:
        """Replies and faults still queued, per role."""
        return self._call("GET", "/_control/pending")

    def set_batch_delay(self, seconds: float) -> None:
        """Seconds a new Message Batch stays in_progress before it ends."""
        self.load({"batch_delay": seconds})

    @property
    def batches(self) -> list[JSON]:
        """Every Message Batch with the records of its requests, oldest first."""
        return list(self._call("GET", "/_control/batches")["batches"])

    def batch_requests(self, role: str | None = None) -> list[JSON]:
        """The records of the requests inside every batch, optionally of one role."""
        items = [item for batch in self.batches for item in batch["requests"]]
        return [item for item in items if role is None or item["role"] == role]

    def reset(self) -> None:
        """Forget requests, queues and cached prefixes; re-apply the start configuration."""
        self._call("POST", "/_control/reset")


class SpawnedFake(FakeControl):
    """A fake server in a child process; `stop()` (or leaving the `with`) ends it."""

    def __init__(self, process: subprocess.Popen[str], base_url: str) -> None:
        super().__init__(base_url)
        self.process = process

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after `timeout`) and reap it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def command(
    *,
    latency: float | None = None,
    role_latency: Mapping[str, float] | None = None,
    script: Path | str | Mapping[str, Any] | None = None,
    required_key: str | None = None,
    default_responder: str | None = None,
    hang_seconds: float = 30.0,
    record_limit: int | None = None,
    batch_delay: float | None = None,
) -> list[str]:
    """The `python -m fake_anthropic` command line for these settings, on a free port."""
    argv = [sys.executable, "-m", "fake_anthropic", "--port", "0"]
    argv += ["--hang-seconds", str(hang_seconds)]
    if latency is not None:
        argv += ["--latency", str(latency)]
    for role, seconds in (role_latency or {}).items():
        argv += ["--role-latency", f"{role}={seconds}"]
    if isinstance(script, Mapping):
        argv += ["--script-json", json.dumps(script)]
    elif script is not None:
        argv += ["--script", str(script)]
    if required_key is not None:
        argv += ["--required-key", required_key]
    if default_responder is not None:
        argv += ["--default-responder", default_responder]
    if record_limit is not None:
        argv += ["--record-limit", str(record_limit)]
    if batch_delay is not None:
        argv += ["--batch-delay", str(batch_delay)]
    return argv


def _read_url(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    line = process.stdout.readline() if ready else ""
    prefix = "listening on "
    if not line.startswith(prefix):
        raise RuntimeError(f"the fake server did not start (exit {process.poll()}): {line!r}")
    return line[len(prefix) :].strip()


def spawn(*, startup_timeout: float = 10.0, **settings: Any) -> SpawnedFake:
    """Start `python -m fake_anthropic` and wait for its address (see `command` for settings)."""
    # The child imports fake_anthropic the way this process did: it is installed with Verity.
    process = subprocess.Popen(command(**settings), stdout=subprocess.PIPE, text=True)
    try:
        return SpawnedFake(process, _read_url(process, startup_timeout))
    except BaseException:
        SpawnedFake(process, "http://127.0.0.1:0").stop()
        raise
