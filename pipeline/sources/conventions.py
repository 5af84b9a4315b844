"""What a service's metric names say, by the community conventions, and the PromQL that reads
each kind of signal (issue 23, items 1 and 2).

The Prometheus backend first discovers the names a service's series carry in the window (one
`/api/v1/label/__name__/values` request), then reads them by kind, never by the shipped
scenarios' names:

- a gauge is a level; `up` says whether each scrape target answers (0 is a target down);
- a counter (`_total`, `_count`, `_sum`) is read through `rate()`, a histogram's `_bucket`
  through a quantile (`pipeline.sources.counters`);
- a request counter whose series carry an HTTP status label (`code`, `status_code`,
  `status`) gives the error ratio: the share of the request rate answered `5xx`;
- a gauge beside its limit, the gauge `X_max`, `X_limit` or `X_capacity` of the same stem
  (`db_pool_in_use` beside `db_pool_max`), or a known family's limit (cAdvisor's
  `container_memory_working_set_bytes` beside `container_spec_memory_limit_bytes`), gives its
  saturation: level over limit.

    signals = select(names, metric="error", status_named=["http_requests_total"])
    signals.gauges          # ["db_pool_in_use", "db_pool_max", "up"]
    signals.error_ratios    # ["http_requests_total"]
    signals.saturations     # [("db_pool_in_use", "db_pool_max")]

A symptom word a planner asks with (`error`, `latency`, `memory` ...) keeps the names that
contain it, as before, plus what the conventions say about that symptom: for errors, the error
ratio of every status-coded counter; for latency, the quantile of every duration histogram
(`_seconds` or `duration` in its name); for memory, restarts and crashes, kube-state-metrics'
restarts and last-terminated reasons (`OOMKilled`) and cAdvisor's OOM events (their series are
read by kind: a restarts counter as a rate, a reason as a 0/1 level); and, whatever the
symptom, the resources (every
saturation pair) and the targets (`up`), as the USE method checks them beside RED's symptoms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pipeline.data.metric_names import (
    BOOKKEEPING,
    CRASHES,
    DURATION,
    KNOWN_LIMITS,
    LIMIT_SUFFIXES,
    SERVER_ERRORS,
    TARGETS,
    error_ratio_name,
    kind_of,
    saturation_name,
)
from pipeline.sources.counters import Derived

STATUS_LABELS = ("code", "status_code", "status")
"""Labels an HTTP or RPC request counter keeps its status in, most common first."""
_LATENCY_WORDS = frozenset({"latency", "slow", "duration", "p95", "p99"})
_ERROR_WORDS = frozenset({"error", "errors", "5xx", "fail", "failure"})
_CRASH_WORDS = frozenset({"memory", "restart", "restarts", "oom", "crash"})


@dataclass(frozen=True)
class Signals:
    """The names to read and how: gauges as levels, cumulative names through `rate()` or a
    quantile, request counters as error ratios, (gauge, limit) pairs as saturations."""

    gauges: list[str] = field(default_factory=list)
    cumulative: list[str] = field(default_factory=list)
    error_ratios: list[str] = field(default_factory=list)
    saturations: list[tuple[str, str]] = field(default_factory=list)


def saturation_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """Every (gauge, limit) pair among `names`: `limit` ends with a LIMIT_SUFFIXES suffix and
    `gauge`, itself no limit, is its stem or starts with the stem and `_`; and the community
    families whose limit has another stem (`KNOWN_LIMITS`) when both are there."""
    gauges = sorted({n for n in names if kind_of(n) == "gauge" and n != TARGETS})
    limits = [n for n in gauges if n.endswith(LIMIT_SUFFIXES)]
    pairs = [(g, limit) for g, limit in KNOWN_LIMITS.items() if g in gauges and limit in gauges]
    for limit in limits:
        stem = limit.rsplit("_", 1)[0]
        pairs += [(g, limit) for g in gauges
                  if g not in limits and (g == stem or g.startswith(stem + "_"))]
    return pairs


def select(names: Sequence[str], *, metric: str | None,
           status_named: Iterable[str] = ()) -> Signals:
    """The signals to read among a service's `names` for a symptom word (every one when
    `metric` is None); `status_named` are the counters whose series carry a status label."""
    coded = [n for n in status_named if kind_of(n) == "counter" and n in names]
    pairs = saturation_pairs(names)
    names = [n for n in names if not n.startswith(BOOKKEEPING)]
    if metric is None:
        chosen = [n for n in names if kind_of(n) != "created"]
        ratios = coded
    else:
        word = metric.lower()
        chosen = [n for n in names if word in n.lower() and kind_of(n) != "created"]
        ratios = coded if word in _ERROR_WORDS else []
        if word in _LATENCY_WORDS:
            chosen += [n for n in names if kind_of(n) == "bucket" and DURATION.search(n)]
        if word in _CRASH_WORDS:
            chosen += [n for n in names if CRASHES.fullmatch(n)]
        chosen += [TARGETS] if TARGETS in names else []
        chosen += [name for pair in pairs for name in pair]
    chosen = list(dict.fromkeys(chosen))
    return Signals(
        gauges=[n for n in chosen if kind_of(n) == "gauge"],
        cumulative=sorted(n for n in chosen if kind_of(n) in ("counter", "bucket")),
        error_ratios=sorted(set(ratios)),
        saturations=pairs)


def error_ratio(name: str, status_label: str, selector: str, window_s: int,
                by: str) -> Derived:
    """The share of counter `name`'s rate whose `status_label` is a 5xx, per `by` label: 0 when
    no series answered 5xx (not absent), absent when nothing was counted at all."""
    def rate(extra: str) -> str:
        matchers = ",".join(m for m in (f'__name__="{name}"', extra, selector) if m)
        return f"sum by ({by}) (rate({{{matchers}}}[{window_s}s]))"
    errors, every = rate(f'{status_label}=~"{SERVER_ERRORS}"'), rate("")
    return Derived(f"({errors} or {every} * 0) / {every}",
                   error_ratio_name(name, status_label, window_s), "ratio")


def saturation(gauge: str, limit: str, selector: str, by: str) -> Derived:
    """`gauge` over its `limit`, per `by` label (1 is at the limit)."""
    def total(name: str) -> str:
        matchers = ",".join(m for m in (f'__name__="{name}"', selector) if m)
        return f"sum by ({by}) ({{{matchers}}})"
    return Derived(f"{total(gauge)} / {total(limit)}", saturation_name(gauge, limit), "ratio")


__all__ = ["STATUS_LABELS", "Signals", "error_ratio", "saturation", "saturation_pairs", "select"]
