"""The neutral request: prompt caching on the static prefix, stable bytes, response helpers."""

from __future__ import annotations

import pytest

from pipeline.providers.messages import MessagesRequest, MessagesResponse

TOOLS = [{"name": "a", "description": "A", "input_schema": {"type": "object"}},
         {"name": "b", "description": "B", "input_schema": {"type": "object"}}]


def _request(**kw: object) -> MessagesRequest:
    fields: dict[str, object] = {
        "role": "verifier", "model": "m", "system": "sys", "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": TOOLS, "tool_choice": {"type": "auto"}} | kw
    return MessagesRequest(**fields)  # type: ignore[arg-type]


def test_messages__cache_control_marks_the_last_tool_and_the_system_block() -> None:
    body = _request().body()
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    assert body["system"] == [{"type": "text", "text": "sys",
                               "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in str(body["messages"])
    assert TOOLS[1].get("cache_control") is None  # the caller's tool list is not touched
    assert "role" not in body and body["tool_choice"] == {"type": "auto"}


def test_messages__without_tools_only_the_system_is_marked() -> None:
    body = _request(tools=(), tool_choice=None).body()
    assert "tools" not in body and "tool_choice" not in body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_messages__same_request_same_bytes_and_digest() -> None:
    assert _request().canonical_bytes() == _request().canonical_bytes()
    assert _request().sha256() == _request().sha256()
    assert _request().sha256() != _request(system="other").sha256()


@pytest.mark.parametrize("request_", [
    _request(), _request(tools=[], tool_choice=None),
    _request(tool_choice={"type": "tool", "name": "b"}, messages=[
        {"role": "user", "content": [{"type": "text", "text": "</tag> \u00e9 1.5"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "a",
                                           "input": {"n": 1.0, "x": [None, True]}}]}]),
], ids=["tools", "no-tools", "forced-tool-and-history"])
def test_messages__a_request_read_back_from_its_bytes_is_the_same_request(
    request_: MessagesRequest,
) -> None:
    # what a MessagesModel sends is read back from the bytes the attempt digests
    again = MessagesRequest.from_canonical(request_.role, request_.canonical_bytes())
    assert again == request_ and again.canonical_bytes() == request_.canonical_bytes()


def test_messages__response_helpers() -> None:
    response = MessagesResponse(content=[
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "text", "text": "a"},
        {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}},
        {"type": "text", "text": "b"},
        {"type": "tool_use", "id": "toolu_2", "name": "y", "input": {}},
    ], stop_reason="tool_use")
    assert response.text() == "ab"
    assert [u["id"] for u in response.tool_uses()] == ["toolu_1", "toolu_2"]
    assert [u["id"] for u in response.tool_uses("y")] == ["toolu_2"]
