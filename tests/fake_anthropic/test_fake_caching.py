"""Usage and prompt caching: the estimator's counts, a breakpoint prefix written once and read
after, the longest cached prefix read, the model in the key."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from fake_anthropic import FakeAnthropic, count_input_tokens, estimate_tokens
from tests.fake_anthropic.helpers import MODEL, USER

CACHED = {"type": "ephemeral"}
TOOLS: list[dict[str, Any]] = [
    {"name": f"tool_{n}", "description": "d" * 40 * n, "input_schema": {"type": "object"}}
    for n in range(1, 4)
]
SYSTEM = [{"type": "text", "text": "You are the Verifier. " * 20}]


def _usage(client: anthropic.Anthropic, **body: Any) -> dict[str, int]:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": USER} | body
    usage = client.messages.create(**params).usage
    return {
        "input": usage.input_tokens,
        "write": usage.cache_creation_input_tokens or 0,
        "read": usage.cache_read_input_tokens or 0,
    }


def _cached_last(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return blocks[:-1] + [blocks[-1] | {"cache_control": CACHED}]


@pytest.fixture(autouse=True)
def _ok(fake: FakeAnthropic) -> None:
    fake.set_default_responder(lambda request: "ok")


def test_caching__estimator_counts() -> None:
    assert estimate_tokens("abcdef") == 2  # '"abcdef"': 8 characters
    assert estimate_tokens({"a": 1}) == 2  # '{"a":1}': 7 characters
    assert estimate_tokens({"b": 1, "a": "é"}) == estimate_tokens({"a": "é", "b": 1})
    body = {"tools": TOOLS, "system": "s", "messages": USER}
    expected = sum(estimate_tokens(t) for t in TOOLS) + estimate_tokens("s")
    assert count_input_tokens(body) == expected + estimate_tokens(USER[0]["content"])


def test_caching__usage_without_breakpoints(client: anthropic.Anthropic) -> None:
    body = {"tools": TOOLS, "system": SYSTEM}
    total = count_input_tokens(body | {"messages": USER})
    assert _usage(client, **body) == {"input": total, "write": 0, "read": 0}
    assert _usage(client, **body) == {"input": total, "write": 0, "read": 0}


def test_caching__last_tool_breakpoint_written_then_read(client: anthropic.Anthropic) -> None:
    body = {"tools": _cached_last(TOOLS), "system": SYSTEM}
    total = count_input_tokens(body | {"messages": USER})
    prefix = sum(estimate_tokens(t) for t in TOOLS)
    assert _usage(client, **body) == {"input": total - prefix, "write": prefix, "read": 0}
    assert _usage(client, **body) == {"input": total - prefix, "write": 0, "read": prefix}
    other_question = {"messages": [{"role": "user", "content": "and the database?"}]}
    assert _usage(client, **body, **other_question)["read"] == prefix


def test_caching__system_breakpoint_reads_the_longest_cached_prefix(
    client: anthropic.Anthropic,
) -> None:
    tools_prefix = sum(estimate_tokens(t) for t in TOOLS)
    system_tokens = estimate_tokens(SYSTEM[0])
    _usage(client, tools=_cached_last(TOOLS))
    both = {"tools": _cached_last(TOOLS), "system": _cached_last(SYSTEM)}
    first, second = _usage(client, **both), _usage(client, **both)
    assert (first["read"], first["write"]) == (tools_prefix, system_tokens)
    assert (second["read"], second["write"]) == (tools_prefix + system_tokens, 0)
    assert first["input"] == second["input"] == estimate_tokens(USER[0]["content"])


def test_caching__a_changed_prefix_or_model_misses(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    body = {"tools": _cached_last(TOOLS)}
    _usage(client, **body)
    changed = [TOOLS[0] | {"description": "changed"}, *_cached_last(TOOLS)[1:]]
    assert _usage(client, tools=changed)["read"] == 0
    assert _usage(client, model="claude-other", **body)["read"] == 0
    assert _usage(client, **body)["read"] > 0
    fake.reset()
    fake.set_default_responder(lambda request: "ok")
    assert _usage(client, **body)["read"] == 0


def test_caching__output_tokens_estimate_the_content(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("composer", "x" * 100)
    message = client.messages.create(
        model=MODEL, max_tokens=64, messages=USER, extra_headers={"x-verity-role": "composer"}
    )
    assert message.usage.output_tokens == estimate_tokens([{"type": "text", "text": "x" * 100}])
