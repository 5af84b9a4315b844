"""The price table: cost per model from usage, snapshot ids, unknown models, the override file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import ConfigurationError
from pipeline.providers.messages import Usage
from pipeline.providers.pricing import DEFAULT_PRICES, PriceTable, cost_usd, load_prices

USAGE = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000,
              cache_write_tokens=400_000)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-5-5", 2.0 + 1.0 + 0.2 + 1.0),
        ("claude-opus-5-5", 4.0 + 2.0 + 0.4 + 2.0),
        ("claude-haiku-5-5", 0.1 + 0.05 + 0.02 + 0.05),
        ("claude-sonnet-5-5-20260928", 2.0 + 1.0 + 0.2 + 1.0),
        ("local-llama", 0.0),
    ],
    ids=["sonnet-5-5", "opus-5-5", "haiku-5-5", "dated-snapshot-priced-as-alias", "unknown-free"],
)
def test_pricing__cost_of_every_token_kind(model: str, expected: float) -> None:
    assert cost_usd(model, USAGE) == pytest.approx(expected)


def test_pricing__longest_prefix_wins() -> None:
    # claude-sonnet-5 is a prefix of claude-sonnet-5-5: the longer id must price it
    table = PriceTable(DEFAULT_PRICES)
    assert table.price("claude-sonnet-5-5-20260928") == DEFAULT_PRICES["claude-sonnet-5-5"]
    assert table.price("claude-sonnet-5-20260630") == DEFAULT_PRICES["claude-sonnet-5"]
    assert table.price("claude-sonnet-55") is None


def test_pricing__file_overrides_and_extends_the_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({
        "claude-sonnet-5-5": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3},
        "gateway-model": {"input": 1, "output": 2},
    }))
    table = load_prices(path)
    assert table.cost_usd("claude-sonnet-5-5", Usage(input_tokens=1_000_000)) == 3.0
    gateway = table.price("gateway-model")
    assert gateway is not None and (gateway.cache_write, gateway.cache_read) == (1.25, 0.1)
    assert table.price("claude-opus-5-5") == DEFAULT_PRICES["claude-opus-5-5"]
    assert load_prices(None).prices == DEFAULT_PRICES


@pytest.mark.parametrize("text", ["{not json", '{"m": {"output": 1}}', '["m"]'],
                         ids=["not-json", "missing-input", "not-an-object"])
def test_pricing__unusable_file_is_a_one_line_configuration_error(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "prices.json"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as raised:
        load_prices(path)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
