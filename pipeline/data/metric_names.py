"""What a metric's name says, by the Prometheus naming conventions, and the names Verity shows
the series it derives by: below both the sources that derive them (`pipeline.sources`) and the
tools and agents that read them back (`pipeline.tools`, `pipeline.agents`).

    kind_of("http_requests_total")                        # "counter"
    saturation_name("db_pool_in_use", "db_pool_max")      # "db_pool_in_use / db_pool_max"
    saturation_of("db_pool_in_use / db_pool_max")         # ("db_pool_in_use", "db_pool_max")
    is_error_ratio(error_ratio_name("http_requests_total", "code", 20))   # True

By the conventions a `_total`, `_count` or `_sum` series only ever grows (a restart resets it),
so its level is its age, not its state; a `_bucket` series is one bucket of a histogram; a
`_created` series is a timestamp; a gauge named `X_max`, `X_limit` or `X_capacity` is the
limit of the gauges of its stem; `up` is Prometheus's own series per scrape target (1 when
its last scrape answered) and the other `scrape_` series are its bookkeeping of the scrape.
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["gauge", "counter", "bucket", "created"]
COUNTER_SUFFIXES = ("_total", "_count", "_sum")
LIMIT_SUFFIXES = ("_max", "_limit", "_capacity")
"""A gauge named with one of these is the limit of the gauges of its stem."""
SERVER_ERRORS = "5.."
"""The status codes counted as errors: the server's own failures."""
KNOWN_LIMITS = {
    # cAdvisor (the kubelet's /metrics/cadvisor): a container's memory against its limit
    # (0 without one: the ratio is then infinite and dropped)
    "container_memory_working_set_bytes": "container_spec_memory_limit_bytes",
}
"""Community metric families whose limit is named by another stem than `<stem>_max`."""
CRASHES = re.compile(r"kube_pod_container_status_(?:restarts_total|last_terminated_reason)"
                     r"|container_oom_events_total")
"""kube-state-metrics' restarts and last-terminated reasons (`OOMKilled`), cAdvisor's OOM
events: what a crash or a restart leaves in a Kubernetes cluster's metrics."""
TARGETS = "up"
"""Prometheus's own series per scrape target: 1 when the last scrape answered, else 0."""
BOOKKEEPING = "scrape_"
"""Prometheus's other series per scrape target (its scrape's duration and sample counts):
the monitoring's bookkeeping, not the service's signals, so never read as them."""
DURATION = re.compile(r"_seconds|duration|latency", re.IGNORECASE)
"""A name that says its values are durations."""
_NAME = r"[A-Za-z_:][\w:]*"
_SATURATION = re.compile(
    rf"(?P<gauge>{_NAME}) / (?P<limit>{_NAME}(?:{'|'.join(LIMIT_SUFFIXES)})"
    rf"|{'|'.join(KNOWN_LIMITS.values())})")
_ERROR_RATIO = re.compile(rf'rate\((?P<name>{_NAME})\{{\w+=~"5\.\."\}}\[\d+s\]\) / '
                          rf"rate\((?P=name)\[\d+s\]\)")
_QUANTILE = re.compile(rf"histogram_quantile\([\d.]+, rate\((?P<name>{_NAME})_bucket\[")


def kind_of(name: str) -> Kind:
    """What a metric's name says it is."""
    if name.endswith("_bucket"):
        return "bucket"
    if name.endswith("_created"):
        return "created"
    if name.endswith(COUNTER_SUFFIXES):
        return "counter"
    return "gauge"


def is_target(metric: str) -> bool:
    """`metric` is Prometheus's `up` of one or more scrape targets (`up{instance="..."}` when
    several are told apart)."""
    return metric == TARGETS or metric.startswith(TARGETS + "{")


def saturation_name(gauge: str, limit: str) -> str:
    """The name a gauge's saturation (level over limit) is shown by."""
    return f"{gauge} / {limit}"


def error_ratio_name(counter: str, status_label: str, window_s: int) -> str:
    """The name a request counter's error ratio (5xx share of its rate) is shown by."""
    return (f'rate({counter}{{{status_label}=~"{SERVER_ERRORS}"}}[{window_s}s]) / '
            f"rate({counter}[{window_s}s])")


def saturation_of(metric: str) -> tuple[str, str] | None:
    """(gauge, limit) when `metric` is a `saturation_name`."""
    found = _SATURATION.fullmatch(metric)
    return (found["gauge"], found["limit"]) if found else None


def is_error_ratio(metric: str) -> bool:
    """`metric` is an `error_ratio_name`."""
    return _ERROR_RATIO.fullmatch(metric) is not None


def is_duration(metric: str) -> bool:
    """`metric` is a duration: a quantile of a duration histogram, or a gauge whose name says
    it is one (`_seconds`, `duration`, `latency`); never a rate or a ratio."""
    found = _QUANTILE.match(metric)
    if found is None and "(" in metric:
        return False
    name = found["name"] if found else metric.split("{", 1)[0]
    return bool(DURATION.search(name)) and kind_of(name) == "gauge"


__all__ = ["BOOKKEEPING", "COUNTER_SUFFIXES", "CRASHES", "DURATION", "KNOWN_LIMITS",
           "LIMIT_SUFFIXES", "SERVER_ERRORS",
           "TARGETS", "Kind", "error_ratio_name", "is_duration", "is_error_ratio", "is_target",
           "kind_of",
           "saturation_name", "saturation_of"]
