"""Counters are rates: how a metric's name says it is cumulative, and the PromQL that turns it
into something whose level means something (issue 23, item 4).

By the Prometheus naming conventions a `_total`, `_count` or `_sum` series only ever grows (a
restart resets it), so its level is its age, not its state; a `_bucket` series is one bucket
of a histogram, meaningful only through a quantile; a `_created` series is a timestamp. So
the Prometheus backend never hands those on as levels: each counter name becomes one
`rate()` query, each histogram one `histogram_quantile(0.95, rate(..._bucket))` query, and
`_created` series are left out.

    kind_of("http_requests_total")                      # "counter"
    derived("http_requests_total", 'job="checkout"', 20)
    #   Derived(promql='rate({__name__="http_requests_total",job="checkout"}[20s])',
    #           metric="rate(http_requests_total[20s])", unit="/s")

The rate window is four steps (Prometheus's own advice: at least four scrape intervals in a
`rate()` range) and never under `MIN_RATE_WINDOW_S`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.data.metric_names import COUNTER_SUFFIXES, Kind, kind_of

QUANTILE = 0.95
MIN_RATE_WINDOW_S = 15
MAX_DERIVED = 12
"""Rate and quantile queries per metrics query: the rest of the cumulative names are left
out (and counted)."""


@dataclass(frozen=True, slots=True)
class Derived:
    """One query over a cumulative metric: its PromQL, the name its series are shown by, and
    their unit."""

    promql: str
    metric: str
    unit: str


def rate_window_s(step_s: int) -> int:
    """The `rate()` range for a query at `step_s`: four steps, at least MIN_RATE_WINDOW_S."""
    return max(4 * step_s, MIN_RATE_WINDOW_S)


def derived(name: str, selector: str, window_s: int, *, base_unit: str = "") -> Derived:
    """The query that makes cumulative metric `name` readable as a level: `rate()` for a
    counter, the QUANTILE quantile for a histogram's `_bucket`. `selector` is the other label
    matchers (no braces); `base_unit` is the unit the name says (`s` for
    `..._seconds_bucket`, `count` for `..._total`)."""
    matchers = ",".join(m for m in (f'__name__="{name}"', selector) if m)
    rate = f"rate({{{matchers}}}[{window_s}s])"
    if kind_of(name) == "bucket":
        return Derived(f"histogram_quantile({QUANTILE:g}, {rate})",
                       f"histogram_quantile({QUANTILE:g}, rate({name}[{window_s}s]))",
                       base_unit)
    unit = "/s" if base_unit in ("", "count") else f"{base_unit}/s"
    return Derived(rate, f"rate({name}[{window_s}s])", unit)


__all__ = ["COUNTER_SUFFIXES", "MAX_DERIVED", "QUANTILE", "Derived", "Kind", "derived", "kind_of",
           "rate_window_s"]
