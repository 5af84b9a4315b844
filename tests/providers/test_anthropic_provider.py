"""AnthropicProvider over httpx2's MockTransport: what it sends, what it maps back, and the
error tree (transient, rejected, configuration) with `retry-after` honoured."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx2
import pytest

from pipeline.config import VeritySettings
from pipeline.errors import (
    ConfigurationError,
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
)
from pipeline.providers.anthropic import AnthropicProvider, retry_after
from pipeline.providers.messages import MessagesRequest

BASE_URL = "http://127.0.0.1:9"
Handler = Callable[[httpx2.Request], httpx2.Response]


def message(**kw: Any) -> dict[str, Any]:
    """A Messages API response body."""
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": "toolu_01abc", "name": "submit_answer",
                     "input": {"a": 1}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 7,
                  "cache_creation_input_tokens": 3},
    } | kw


def provider(handler: Handler, **kw: Any) -> AnthropicProvider:
    client = httpx2.Client(transport=httpx2.MockTransport(handler))
    return AnthropicProvider(api_key="sk-test", base_url=BASE_URL, http_client=client, **kw)


def request(role: str = "composer") -> MessagesRequest:
    return MessagesRequest(
        role=role, model="claude-sonnet-5-5", system="sys", max_tokens=100,
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        tools=[{"name": "submit_answer", "description": "d", "input_schema": {"type": "object"}}],
        tool_choice={"type": "auto"})


def error(status: int, kind: str = "api_error", **headers: str) -> Handler:
    body = {"type": "error", "error": {"type": kind, "message": f"injected {status}"}}
    return lambda _: httpx2.Response(status, json=body, headers=headers)


def test_provider__sends_the_body_and_the_role_header_and_maps_the_response() -> None:
    seen: list[httpx2.Request] = []

    def handler(req: httpx2.Request) -> httpx2.Response:
        seen.append(req)
        return httpx2.Response(200, json=message(), headers={"request-id": "req_01x"})

    response = provider(handler).send(request("verifier"))
    sent = seen[0]
    assert sent.method == "POST" and sent.url.path == "/v1/messages"
    assert sent.headers["x-verity-role"] == "verifier"
    assert sent.headers["x-stainless-retry-count"] == "0"
    body = json.loads(sent.content)
    assert body == request("verifier").body()
    assert response.content[1] == {"type": "tool_use", "id": "toolu_01abc",
                                   "name": "submit_answer", "input": {"a": 1}}
    assert response.content[0]["type"] == "thinking"
    assert response.stop_reason == "tool_use" and response.model == "claude-sonnet-5-5"
    assert (response.usage.input_tokens, response.usage.output_tokens,
            response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (10, 5, 7, 3)
    assert response.request_id == "req_01x" and response.latency_ms >= 0


def test_provider__sdk_runs_without_retries_and_with_explicit_timeouts() -> None:
    sdk = provider(lambda _: httpx2.Response(200, json=message()),
                   timeout_s=42.0, connect_timeout_s=3.0)._client
    assert sdk.max_retries == 0
    assert isinstance(sdk.timeout, httpx2.Timeout)
    assert (sdk.timeout.read, sdk.timeout.connect) == (42.0, 3.0)


def test_provider__absent_cache_counts_are_zero() -> None:
    usage = {"input_tokens": 4, "output_tokens": 2}
    response = provider(lambda _: httpx2.Response(200, json=message(usage=usage))).send(request())
    assert (response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (0, 0)


@pytest.mark.parametrize(
    ("handler", "wait"),
    [
        (error(429, "rate_limit_error", **{"retry-after": "7"}), 7.0),
        (error(429, "rate_limit_error", **{"retry-after-ms": "1500", "retry-after": "9"}), 1.5),
        (error(429, "rate_limit_error"), None),
        (error(529, "overloaded_error"), None),
        (error(529, "overloaded_error", **{"retry-after": "2"}), 2.0),
        (error(500), None),
        (error(502), None),
        (error(503), None),
        (error(408), None),
        (error(400, **{"x-should-retry": "true"}), None),
    ],
    ids=["429-retry-after", "429-retry-after-ms", "429-no-header", "529", "529-retry-after",
         "500", "502", "503", "408", "x-should-retry-true"],
)
def test_provider__transient_statuses_are_unavailable_with_retry_after(
    handler: Handler, wait: float | None
) -> None:
    with pytest.raises(ProviderUnavailableError) as raised:
        provider(handler).send(request())
    assert raised.value.retry_after == wait
    assert "\n" not in str(raised.value) and "composer" in str(raised.value)


@pytest.mark.parametrize(
    "exception",
    [httpx2.ReadTimeout("slow"), httpx2.ConnectTimeout("slow"), httpx2.ConnectError("refused"),
     httpx2.RemoteProtocolError("peer closed connection without sending complete message")],
    ids=["read-timeout", "connect-timeout", "connection-refused", "dropped-connection"],
)
def test_provider__timeouts_and_dropped_connections_are_transient(exception: Exception) -> None:
    def handler(req: httpx2.Request) -> httpx2.Response:
        raise exception

    with pytest.raises(ProviderUnavailableError) as raised:
        provider(handler).send(request())
    assert raised.value.retry_after is None


@pytest.mark.parametrize(
    "status", [400, 404, 413, 422, 402], ids=["400", "404", "413", "422", "402"])
def test_provider__refused_requests_are_rejected_not_retryable(status: int) -> None:
    with pytest.raises(ProviderRejectedError) as raised:
        provider(error(status, "invalid_request_error")).send(request())
    assert not isinstance(raised.value, ProviderUnavailableError)  # never retried
    assert f"HTTP {status} injected {status}" in str(raised.value)


def test_provider__x_should_retry_false_overrides_a_transient_status() -> None:
    with pytest.raises(ProviderRejectedError):
        provider(error(503, **{"x-should-retry": "false"})).send(request())


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, "ANTHROPIC_API_KEY was rejected (401): set a valid key or unset it to use the "
           "offline agents"),
     (403, "ANTHROPIC_API_KEY may not use claude-sonnet-5-5 (403): choose another model "
           "(VERITY_MODEL_COMPOSER) or another key")],
    ids=["401", "403"],
)
def test_provider__rejected_key_is_a_one_line_configuration_error(
    status: int, expected: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        provider(error(status, "authentication_error")).send(request())
    assert str(raised.value) == expected
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


@pytest.mark.parametrize("key", [None, ""], ids=["unset", "empty"])
def test_provider__missing_key_is_a_one_line_configuration_error(key: str | None) -> None:
    with pytest.raises(ConfigurationError) as raised:
        AnthropicProvider(api_key=key)
    assert "ANTHROPIC_API_KEY is not set" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_provider__malformed_json_body_is_invalid_output() -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=b'{"id": "msg_01", "content": [',
                               headers={"content-type": "application/json"})

    with pytest.raises(ProviderOutputInvalidError):
        provider(handler).send(request())


def test_provider__from_settings_uses_key_base_url_and_timeouts(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:7777")
    monkeypatch.setenv("VERITY_LLM_TIMEOUT_S", "33")
    built = AnthropicProvider.from_settings(VeritySettings())
    assert built.base_url.startswith("http://127.0.0.1:7777")
    assert built._client.api_key == "sk-env"
    assert built._client.timeout.read == 33.0  # type: ignore[union-attr]
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigurationError):
        AnthropicProvider.from_settings(VeritySettings())


def test_provider__retry_after_forms() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    wait = retry_after({"retry-after": later})
    assert wait is not None and 25 <= wait <= 31
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None
    assert retry_after({"retry-after": "-3"}) == 0.0
