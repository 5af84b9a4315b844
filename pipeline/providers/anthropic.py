"""The Anthropic Messages API through the official SDK: the only module that imports `anthropic`.

The SDK runs with `max_retries=0` and explicit timeouts: the runtime owns every retry
(`pipeline.attempts`). This module maps the SDK's errors onto Verity's tree, by type:

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
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

import anthropic

from pipeline.errors import (
    ConfigurationError,
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
    VerityError,
)
from pipeline.providers.messages import MessagesRequest, MessagesResponse, Usage

ROLE_HEADER = "x-verity-role"
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
        """`http_client` is the SDK's HTTP client class (tests pass one on a MockTransport)."""
        if not api_key:
            raise ConfigurationError(MISSING_KEY)
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, http_client=http_client,
            timeout=anthropic.Timeout(timeout_s, connect=connect_timeout_s),
        )

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
        """Send one request; return its neutral response or raise a Verity error."""
        body = request.body()
        started = time.perf_counter()
        try:
            message = self._client.messages.create(
                **body, extra_headers={ROLE_HEADER: request.role})
        except anthropic.APIError as exc:
            raise _map_error(exc, request) from None
        except ValueError as exc:  # a 200 whose body is not JSON
            raise ProviderOutputInvalidError(
                f"{request.role}: the provider's response is not valid JSON") from exc
        latency_ms = (time.perf_counter() - started) * 1000
        try:
            return _response(message, latency_ms)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ProviderOutputInvalidError(
                f"{request.role}: the provider's response is not a Messages response") from exc

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()


def _response(message: Any, latency_ms: float) -> MessagesResponse:
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
        request_id=message._request_id,
        latency_ms=round(latency_ms, 3),
    )


def _map_error(exc: anthropic.APIError, request: MessagesRequest) -> VerityError:
    who = f"{request.role} ({request.model})"
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderUnavailableError(f"{who}: the request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnavailableError(f"{who}: the connection failed")
    if not isinstance(exc, anthropic.APIStatusError):
        return ProviderOutputInvalidError(f"{who}: the provider's response is not usable")
    status = exc.status_code
    detail = _one_line(exc.api_message or exc.type or "")
    if status == 401:
        return ConfigurationError(
            "ANTHROPIC_API_KEY was rejected (401): set a valid key or unset it to use the "
            "offline agents")
    if status == 403:
        return ConfigurationError(
            f"ANTHROPIC_API_KEY may not use {request.model} (403): choose another model "
            f"(VERITY_MODEL_{request.role.upper()}) or another key")
    headers = exc.response.headers
    if _transient(status, headers):
        return ProviderUnavailableError(f"{who}: HTTP {status} {detail}".rstrip(),
                                        retry_after=retry_after(headers))
    return ProviderRejectedError(f"{who}: HTTP {status} {detail}".rstrip())


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
