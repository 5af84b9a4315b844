"""What a model call cost: a price table per model, overridable from a JSON file.

Prices are USD per million tokens, from Anthropic's published price list (November 2026):
input, output, cache write (the 5-minute `ephemeral` cache Verity uses) and cache read.

| model               | input | output | cache write | cache read |
|---------------------|-------|--------|-------------|------------|
| claude-fable-5-1    | 10.00 | 50.00  | 12.50       | 1.00       |
| claude-opus-5-5     |  4.00 | 20.00  |  5.00       | 0.20       |
| claude-sonnet-5-5   |  2.00 | 10.00  |  2.50       | 0.10       |
| claude-haiku-5-5    |  0.10 |  0.50  |  0.125      | 0.01       |
| claude-opus-5       |  5.00 | 25.00  |  6.25       | 0.50       |
| claude-sonnet-5     |  2.00 | 10.00  |  2.50       | 0.20       |
| claude-haiku-4-5    |  1.00 |  5.00  |  1.25       | 0.10       |

Claude Haiku 5.5 is priced in bands; the table holds the band for prompts up to 100,000 tokens,
which is where every Verity prompt sits. A dated snapshot id (`claude-sonnet-5-5-20260928`) is
priced as its alias (longest matching prefix). A model missing from the table costs 0.0: a local
model server behind `ANTHROPIC_BASE_URL` has no price, and a made-up one would be worse than none.
Override or extend the table with `VERITY_PRICES_FILE` (see `load_prices`).

A call answered through the Message Batches API costs half (`BATCH_DISCOUNT`) of every one of
its token prices, cache reads and writes included (the discounts stack): `cost_usd` applies it
when the usage says `batched` (`Usage.batched`, set by `pipeline.providers.batches`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipeline.errors import ConfigurationError
from pipeline.providers.messages import Usage

PER_MILLION = 1_000_000
BATCH_DISCOUNT = 0.5
"""What a batched call pays of the listed prices."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


class TokenUsage(Protocol):
    """Anything with the four token counts (a provider response's usage, a ModelReply)."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...

    @property
    def cache_read_tokens(self) -> int: ...

    @property
    def cache_write_tokens(self) -> int: ...


DEFAULT_PRICES: dict[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0, 12.5, 1.0),
    "claude-opus-5-5": Price(4.0, 20.0, 5.0, 0.2),
    "claude-sonnet-5-5": Price(2.0, 10.0, 2.5, 0.1),
    "claude-haiku-5-5": Price(0.1, 0.5, 0.125, 0.01),
    "claude-opus-5": Price(5.0, 25.0, 6.25, 0.5),
    "claude-sonnet-5": Price(2.0, 10.0, 2.5, 0.2),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.1),
}


@dataclass(frozen=True)
class PriceTable:
    """Prices by model id; `price` falls back to the longest id the model starts with."""

    prices: Mapping[str, Price]
    batch_discount: float = BATCH_DISCOUNT
    """The share of the listed prices a batched call pays."""

    def price(self, model: str) -> Price | None:
        """The model's price, or None when it is not in the table."""
        if model in self.prices:
            return self.prices[model]
        prefixes = [m for m in self.prices if model.startswith(m + "-")]
        return self.prices[max(prefixes, key=len)] if prefixes else None

    def cost_usd(self, model: str, usage: TokenUsage, *, batch: bool | None = None) -> float:
        """USD for one call's usage; 0.0 for a model without a price. At the batch rate when
        `batch` is true, or (None) when `usage` is a `Usage` that says `batched`."""
        price = self.price(model)
        if price is None:
            return 0.0
        total = (usage.input_tokens * price.input + usage.output_tokens * price.output
                 + usage.cache_write_tokens * price.cache_write
                 + usage.cache_read_tokens * price.cache_read)
        if batch is None:
            batch = isinstance(usage, Usage) and usage.batched
        if batch:
            total *= self.batch_discount
        return round(total / PER_MILLION, 8)


DEFAULT_TABLE = PriceTable(DEFAULT_PRICES)


def load_prices(path: Path | None) -> PriceTable:
    """The built-in table, with the models of the JSON file at `path` added or replaced.

    The file maps model ids to `{"input", "output", "cache_write", "cache_read"}` in USD per
    million tokens; `cache_write` defaults to 1.25 × input and `cache_read` to 0.1 × input.
    """
    if path is None:
        return DEFAULT_TABLE
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        overrides = {model: _price(entry) for model, entry in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ConfigurationError(f"prices file {path} is not usable: {exc}") from None
    return PriceTable({**DEFAULT_PRICES, **overrides})


def _price(entry: Mapping[str, float]) -> Price:
    base = float(entry["input"])
    return Price(
        input=base, output=float(entry["output"]),
        cache_write=float(entry.get("cache_write", base * 1.25)),
        cache_read=float(entry.get("cache_read", base * 0.1)),
    )


def cost_usd(model: str, usage: TokenUsage, table: PriceTable | None = None, *,
             batch: bool | None = None) -> float:
    """USD for one call's usage under `table` (the built-in table by default); `batch` as
    for `PriceTable.cost_usd`."""
    return (table or DEFAULT_TABLE).cost_usd(model, usage, batch=batch)
