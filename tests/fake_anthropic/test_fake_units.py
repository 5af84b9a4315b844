"""The fake's pure parts: minted ids, reply and fault forms, the minimal-instance responder
against Verity's own contracts, the prompt cache."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from fake_anthropic import (
    IdMint,
    PromptCache,
    count_input_tokens,
    estimate_tokens,
    minimal_instance,
    minimal_responder,
    parse_fault,
)
from models.agent import KnowledgeAnswer, Plan
from models.composer import ComposerOutput
from models.executor import ExecutorEvidenceV2
from models.verifier import VerifierOutput


def test_ids__real_shape_unique_and_seedable() -> None:
    mint = IdMint()
    ids = [mint.mint("toolu") for _ in range(5000)]
    assert len(set(ids)) == 5000
    assert all(re.fullmatch(r"toolu_01[0-9A-Za-z]{22}", i) for i in ids)
    assert [IdMint(7).mint("msg") for _ in range(2)] == [IdMint(7).mint("msg")] * 2


def test_ids__a_seeded_mint_never_repeats_itself() -> None:
    mint = IdMint(1)
    assert len({mint.mint("toolu") for _ in range(100)}) == 100


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("429", {"fault": "429", "retry_after": 1.0}, id="429-default-retry-after"),
        pytest.param(529, {"fault": "529"}, id="int"),
        pytest.param("overloaded", {"fault": "529"}, id="alias"),
        pytest.param({"fault": "hang", "seconds": 2}, {"fault": "hang", "seconds": 2.0}, id="hang"),
        pytest.param(
            {"fault": "500", "message": "boom", "retry_after": 0.5},
            {"fault": "500", "message": "boom", "retry_after": 0.5},
            id="options",
        ),
    ],
)
def test_faults__forms(spec: object, expected: dict[str, Any]) -> None:
    assert parse_fault(spec).to_json() == expected


@pytest.mark.parametrize(
    "contract",
    [VerifierOutput, ComposerOutput, Plan, ExecutorEvidenceV2, KnowledgeAnswer],
    ids=lambda c: c.__name__,
)
def test_responders__minimal_instance_validates_against_verity_contracts(
    contract: type[pydantic.BaseModel],
) -> None:
    instance = minimal_instance(contract.model_json_schema())
    contract.model_validate(instance)


def test_responders__minimal_instance_constraints() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 3},
            "x": {"type": "number", "exclusiveMinimum": 0},
            "s": {"type": "string", "minLength": 2},
            "when": {"type": "string", "format": "date-time"},
            "items": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "string"}]},
            "optional": {"type": "string"},
        },
        "required": ["n", "x", "s", "when", "items", "maybe"],
    }
    assert minimal_instance(schema) == {
        "n": 3,
        "x": 1.0,
        "s": "xx",
        "when": "1970-01-01T00:00:00Z",
        "items": ["a", "a"],
        "maybe": None,
    }


def test_responders__minimal_responder_without_a_forced_tool_says_ok() -> None:
    assert minimal_responder({"messages": []}) == {"text": "ok"}
    tool = {"name": "t", "input_schema": {"type": "object"}}
    assert minimal_responder({"tools": [tool], "tool_choice": {"type": "any"}}) == {
        "tool_use": {"name": "t", "input": {}}
    }


def test_cache__accounting_is_additive_and_remembers_prefixes() -> None:
    cache = PromptCache()
    tool = {"name": "t", "input_schema": {"type": "object"}, "cache_control": {"type": "x"}}
    body = {"model": "m", "tools": [tool], "messages": [{"role": "user", "content": "hi"}]}
    prefix = estimate_tokens({k: v for k, v in tool.items() if k != "cache_control"})
    first, second = cache.account(body), cache.account(body)
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (prefix, 0)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, prefix)
    assert first.input_tokens + prefix == count_input_tokens(body)
    cache.clear()
    assert cache.account(body).cache_read_input_tokens == 0
