"""The Anthropic Messages API through the official SDK: the only module that imports `anthropic`.

The SDK runs with `max_retries=0` and explicit timeouts: the runtime owns every retry
(`pipeline.run.attempts`). This module maps the SDK's errors onto Verity's tree, by type:

| SDK error                                          | Verity error                          |
|----------------------------------------------------|---------------------------------------|
| missing key                                        | ConfigurationError (one line)         |
| AuthenticationError 401, PermissionDeniedError 403 | ConfigurationError (one line)         |
| RateLimitError 429, 408, 409, InternalServerError  | ProviderUnavailableError, with        |
| 5xx and 529, APITimeoutError, APIConnectionError   | `retry_after` from `retry-after(-ms)` |
| any other status (400, 404, 413, 422 ...)          | ProviderRejectedError                 |
| a 200 whose body is not the Messages shape          | ProviderOutputInvalidError            |

A response header `x-should-retry: true|false` overrides the status rule, as the SDK does.
Every request carries `x-verity-role: <role>`.

Message Batches. `create_batch`, `retrieve_batch`, `batch_results` and `cancel_batch` are the
SDK half of `pipeline.providers.batches` (which holds the batching and no SDK): their errors map
as above; an `errored` result's error object maps by its type as its status would
(rate_limit_error as 429, overloaded_error as 529, invalid_request_error as 400 ...); a
succeeded result becomes a `MessagesResponse` with `batch_id` and `usage.batched` set.

Cancellation. Without a `CancelToken` bound to the calling context (`pipeline.run.cancellation`) a
request is sent from the calling thread on one shared client, as always. With one, the request
runs on a helper thread, on a *lane*: an SDK client of its own with a single connection, taken
from a pool of idle lanes. The calling thread waits for the reply or the token, whichever comes
first; when the token wins it shuts the lane's socket down (`shutdown(SHUT_RDWR)`, which wakes
a read blocked in another thread, where `close()` does not), so the request is really aborted,
and raises `RunCancelledError` at once; the helper ends within milliseconds and its lane is
closed, never reused. A lane learns its socket from httpcore's `trace` extension (set on each
request by an httpx event hook); a request not yet on the wire when the token wins is stopped
before it is sent. With an `http_client` of the caller's (tests on a MockTransport) there are
no lanes: the helper thread finishes on the shared client and its reply is discarded.
"""

from __future__ import annotations

import email.utils
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import anthropic
import httpx2

from pipeline.errors import (
    ConfigurationError,
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
    RunCancelledError,
    VerityError,
)
from pipeline.providers.batches import BATCH_COUNTS, BatchItem, BatchResult, BatchStatus
from pipeline.providers.messages import MessagesRequest, MessagesResponse, Usage
from pipeline.run.cancellation import CancelToken, current_token

ROLE_HEADER = "x-verity-role"
_T = TypeVar("_T")
_TRANSIENT_STATUS = frozenset({408, 409, 429})
MISSING_KEY = ("ANTHROPIC_API_KEY is not set: set it to use Claude, or set VERITY_PROVIDER=offline "
               "to use the offline agents")


class AnthropicProvider:
    """Sends `MessagesRequest`s to an Anthropic-compatible Messages API."""

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 5.0,
        http_client: Any | None = None,
    ) -> None:
        """`http_client` is an httpx2 client for the SDK (tests pass one on a MockTransport);
        with it, cancelled requests are discarded but not aborted (no lanes)."""
        if not api_key:
            raise ConfigurationError(MISSING_KEY)
        options: dict[str, Any] = {
            "api_key": api_key, "base_url": base_url, "max_retries": 0,
            "timeout": anthropic.Timeout(timeout_s, connect=connect_timeout_s),
        }
        self._client = anthropic.Anthropic(**options, http_client=http_client)
        self._lanes = _Lanes(options) if http_client is None else None

    @classmethod
    def from_settings(cls, settings: Any, *, http_client: Any | None = None
                      ) -> AnthropicProvider:
        """The provider `VeritySettings` describes (key, base URL, timeouts)."""
        key = settings.anthropic_api_key
        return cls(
            api_key=key.get_secret_value() if key is not None else None,
            base_url=settings.anthropic_base_url, timeout_s=settings.llm_timeout_s,
            connect_timeout_s=settings.llm_connect_timeout_s, http_client=http_client,
        )

    @property
    def base_url(self) -> str:
        """Where requests go."""
        return str(self._client.base_url)

    def send(self, request: MessagesRequest) -> MessagesResponse:
        """Send one request; return its neutral response or raise a Verity error.

        With a cancel token bound, RunCancelledError as soon as it is set (the request is
        aborted); see the module docstring."""
        token = current_token()
        if token is None:
            return _send(self._client, request)
        return self._send_cancellable(request, token)

    def _send_cancellable(self, request: MessagesRequest, token: CancelToken
                          ) -> MessagesResponse:
        who = f"{request.role} ({request.model})"
        token.raise_if_cancelled(who)
        lane = self._lanes.take() if self._lanes is not None else None
        client = lane.client if lane is not None else self._client
        call = _Call(lambda: _send(client, request),
                     on_abandoned=lane.close if lane is not None else None)
        forget = token.on_cancel(call.wake)
        try:
            call.start()
            finished = call.settle()
        finally:
            forget()
        if finished:
            if lane is not None and self._lanes is not None:
                self._lanes.put(lane)
            return call.result()
        if lane is not None:
            lane.abort()
        raise RunCancelledError(f"{who}: request abandoned, {token.reason}")

    # -- Message Batches (the SDK half of pipeline.providers.batches) ----------------------

    def create_batch(self, items: Sequence[BatchItem], *, timeout_s: float | None = None
                     ) -> BatchStatus:
        """Create one Message Batch of `items` (each body as `send` would post it)."""
        requests: Any = [{"custom_id": item.custom_id, "params": item.request.body()}
                         for item in items]
        return self._batch_call(
            f"Message Batch of {len(items)}",
            lambda c: _batch_status(c.messages.batches.create(requests=requests)), timeout_s)

    def retrieve_batch(self, batch_id: str, *, timeout_s: float | None = None) -> BatchStatus:
        """The batch's processing status now."""
        return self._batch_call(
            f"Message Batch {batch_id}",
            lambda c: _batch_status(c.messages.batches.retrieve(batch_id)), timeout_s)

    def cancel_batch(self, batch_id: str, *, timeout_s: float | None = None) -> BatchStatus:
        """Ask the API to cancel the batch (it goes `canceling`, then ends)."""
        return self._batch_call(
            f"Message Batch {batch_id}",
            lambda c: _batch_status(c.messages.batches.cancel(batch_id)), timeout_s)

    def batch_results(self, batch_id: str, *, timeout_s: float | None = None
                      ) -> list[BatchResult]:
        """Every result line of an ended batch (read from its `results_url`), in file order."""
        def read(client: anthropic.Anthropic) -> list[BatchResult]:
            decoder = client.messages.batches.results(batch_id)
            try:
                return [_batch_result(line, batch_id) for line in decoder]
            finally:
                decoder.close()

        return self._batch_call(f"Message Batch {batch_id} results", read, timeout_s)

    def _batch_call(self, what: str, call: Callable[[anthropic.Anthropic], _T],
                    timeout_s: float | None) -> _T:
        client = self._client if timeout_s is None else self._client.with_options(
            timeout=timeout_s)
        try:
            return call(client)
        except anthropic.APIError as exc:
            raise _map_api_error(exc, what, forbidden=(
                f"ANTHROPIC_API_KEY may not use the Message Batches API (403): {what}"
            )) from None
        except (ValueError, AttributeError, TypeError, KeyError) as exc:  # a 200 of another shape
            raise ProviderOutputInvalidError(
                f"{what}: the provider's answer is not a Message Batches answer") from exc

    def close(self) -> None:
        """Close the HTTP connections (the shared client's and the idle lanes')."""
        self._client.close()
        if self._lanes is not None:
            self._lanes.close()


def _send(client: anthropic.Anthropic, request: MessagesRequest) -> MessagesResponse:
    """One request on `client`, from the calling thread."""
    body = request.body()
    started = time.perf_counter()
    try:
        message = client.messages.create(
            **body, extra_headers={ROLE_HEADER: request.role})
    except anthropic.APIError as exc:
        raise _map_error(exc, request) from None
    except ValueError as exc:  # a 200 whose body is not JSON
        raise ProviderOutputInvalidError(
            f"{request.role}: the provider's response is not valid JSON") from exc
    latency_ms = (time.perf_counter() - started) * 1000
    try:
        return _response(message, latency_ms, request_id=message._request_id)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ProviderOutputInvalidError(
            f"{request.role}: the provider's response is not a Messages response") from exc


def _response(message: Any, latency_ms: float, *, request_id: str | None) -> MessagesResponse:
    usage = message.usage
    content = [block.to_dict() for block in message.content]
    return MessagesResponse(
        content=content,
        stop_reason=message.stop_reason,
        usage=Usage(
            input_tokens=int(usage.input_tokens or 0),
            output_tokens=int(usage.output_tokens or 0),
            cache_read_tokens=int(usage.cache_read_input_tokens or 0),
            cache_write_tokens=int(usage.cache_creation_input_tokens or 0),
        ),
        model=str(message.model),
        request_id=request_id,
        latency_ms=round(latency_ms, 3),
    )


def _map_error(exc: anthropic.APIError, request: MessagesRequest) -> VerityError:
    return _map_api_error(exc, f"{request.role} ({request.model})", forbidden=(
        f"ANTHROPIC_API_KEY may not use {request.model} (403): choose another model "
        f"(VERITY_MODEL_{request.role.upper()}) or another key"))


def _map_api_error(exc: anthropic.APIError, who: str, *, forbidden: str) -> VerityError:
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderUnavailableError(f"{who}: the request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnavailableError(f"{who}: the connection failed")
    if not isinstance(exc, anthropic.APIStatusError):
        return ProviderOutputInvalidError(f"{who}: the provider's response is not usable")
    detail = _one_line(exc.api_message or exc.type or "")
    return _status_error(exc.status_code, exc.response.headers, f"{who}: HTTP",
                         detail=detail, forbidden=forbidden)


def _status_error(status: int, headers: Mapping[str, str], what: str, *, detail: str,
                  forbidden: str) -> VerityError:
    """The Verity error for a `status` answer; `what` opens its message."""
    if status == 401:
        return ConfigurationError(
            "ANTHROPIC_API_KEY was rejected (401): set a valid key or unset it to use the "
            "offline agents")
    if status == 403:
        return ConfigurationError(forbidden)
    if _transient(status, headers):
        return ProviderUnavailableError(f"{what} {status} {detail}".rstrip(),
                                        retry_after=retry_after(headers))
    return ProviderRejectedError(f"{what} {status} {detail}".rstrip())


_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504,
    "gateway_timeout_error": 504, "overloaded_error": 529,
}
"""The status each error type of an `errored` batch result stands for (unknown: 500)."""


def _batch_status(batch: Any) -> BatchStatus:
    counts = batch.request_counts
    return BatchStatus(
        id=str(batch.id), processing_status=str(batch.processing_status),
        request_counts={name: int(getattr(counts, name)) for name in BATCH_COUNTS},
        results_url=batch.results_url,
    )


def _batch_result(line: Any, batch_id: str) -> BatchResult:
    custom_id = str(line.custom_id)
    result = line.result
    who = f"{custom_id} in {batch_id}"
    if result.type == "succeeded":
        try:
            response = _response(result.message, 0.0, request_id=None)
        except (AttributeError, TypeError, ValueError) as exc:
            error = ProviderOutputInvalidError(f"{who}: the result is not a Messages response")
            error.__cause__ = exc
            return BatchResult(custom_id, "errored", error=error)
        batched = replace(response, batch_id=batch_id,
                          usage=replace(response.usage, batched=True))
        return BatchResult(custom_id, "succeeded", response=batched)
    if result.type == "errored":
        body = result.error.error
        error_type = str(getattr(body, "type", "") or "")
        detail = _one_line(getattr(body, "message", "") or error_type)
        status = _ERROR_STATUS.get(error_type, 500)
        return BatchResult(custom_id, "errored", error=_status_error(
            status, {}, f"{who}: errored", detail=detail,
            forbidden=f"ANTHROPIC_API_KEY may not send {who} (403): {detail}"))
    if result.type in ("canceled", "expired"):
        return BatchResult(custom_id, result.type)
    raise ValueError(f"{who}: unknown result type {result.type!r}")


def _transient(status: int, headers: Mapping[str, str]) -> bool:
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in _TRANSIENT_STATUS or status >= 500


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the provider asks us to wait: `retry-after-ms`, else `retry-after` as seconds
    or as an HTTP date; None when absent or unreadable."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
    date = headers.get("retry-after")
    parsed = email.utils.parsedate_tz(date) if date else None
    if parsed is None:
        return None
    return max(0.0, float(email.utils.mktime_tz(parsed)) - time.time())


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# -- cancellable requests ------------------------------------------------------------------

_STREAM_EVENTS = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})
"""httpcore trace events whose return value is the connection's (new) network stream."""
_SENDING_EVENTS = frozenset({"connection.connect_tcp.started",
                             "http11.send_request_headers.started",
                             "http2.send_request_headers.started"})
"""Events before anything of a request goes out: an aborted lane stops there."""


class _Aborted(Exception):
    """Raised inside an aborted lane's request, before it is sent."""


class _Lane:
    """One SDK client with one connection whose socket a cancel can shut down."""

    def __init__(self, options: Mapping[str, Any], ssl_context: ssl.SSLContext) -> None:
        self._lock = threading.Lock()
        self._stream: Any = None
        self._aborted = False
        http = anthropic.DefaultHttpxClient(
            verify=ssl_context, event_hooks={"request": [self._on_request]},
            limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1))
        self.client = anthropic.Anthropic(**options, http_client=http)

    def abort(self) -> None:
        """Stop the lane's request: shut its socket down; a request not yet sent never is."""
        with self._lock:
            self._aborted = True
            stream = self._stream
        _shutdown(stream)

    def close(self) -> None:
        """Close the client (after its request ended)."""
        self.client.close()

    def __del__(self) -> None:
        # as the SDK's own client wrapper does: an idle lane of a provider nobody closed still
        # closes its connection when it goes
        try:
            self.client.close()
        except Exception:  # at interpreter exit anything may be gone
            pass

    def _on_request(self, request: httpx2.Request) -> None:
        request.extensions = {**request.extensions, "trace": self._trace}

    def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event in _STREAM_EVENTS:
            with self._lock:
                self._stream = info.get("return_value")
                aborted = self._aborted
            if aborted:
                _shutdown(self._stream)
        elif event in _SENDING_EVENTS and self._aborted:
            raise _Aborted("the request was cancelled before it was sent")


def _shutdown(stream: Any) -> None:
    sock = stream.get_extra_info("socket") if stream is not None else None
    if not isinstance(sock, socket.socket):
        return
    try:  # socket.socket's own shutdown, also for an SSLSocket: the fd, not the TLS session
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed: the request is over anyway
        pass


class _Lanes:
    """Idle lanes, built on demand (one per request in flight at the peak) and reused."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)
        self._lock = threading.Lock()
        self._idle: list[_Lane] = []
        self._ssl_context: ssl.SSLContext | None = None

    def take(self) -> _Lane:
        """An idle lane, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if self._ssl_context is None:  # one TLS context for every lane (tens of ms each)
                self._ssl_context = httpx2.create_ssl_context()
            context = self._ssl_context
        return _Lane(self._options, context)

    def put(self, lane: _Lane) -> None:
        """Give back a lane whose request ended normally."""
        with self._lock:
            self._idle.append(lane)

    def close(self) -> None:
        """Close every idle lane."""
        with self._lock:
            idle, self._idle = self._idle, []
        for lane in idle:
            lane.close()


class _Call:
    """One request on a helper thread; the caller either gets its outcome or abandons it."""

    def __init__(self, send: Callable[[], MessagesResponse], *,
                 on_abandoned: Callable[[], None] | None) -> None:
        self._send = send
        self._on_abandoned = on_abandoned
        self._lock = threading.Lock()
        self._woken = threading.Event()
        self._state = "running"
        self._value: MessagesResponse | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Send from a daemon thread."""
        threading.Thread(target=self._run, name="verity-model-call", daemon=True).start()

    def wake(self) -> None:
        """Stop waiting (the token was set)."""
        self._woken.set()

    def settle(self) -> bool:
        """Wait for the outcome or a wake; True if the outcome is there (it wins a tie),
        False if the call is abandoned from now on."""
        self._woken.wait()
        with self._lock:
            if self._state == "done":
                return True
            self._state = "abandoned"
            return False

    def result(self) -> MessagesResponse:
        """The response, or the error the request raised."""
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def _run(self) -> None:
        value: MessagesResponse | None = None
        error: BaseException | None = None
        try:
            value = self._send()
        except BaseException as exc:  # handed to the caller, or dropped with the call
            error = exc
        with self._lock:
            abandoned = self._state == "abandoned"
            if not abandoned:
                self._state, self._value, self._error = "done", value, error
        self._woken.set()
        if abandoned and self._on_abandoned is not None:
            self._on_abandoned()
