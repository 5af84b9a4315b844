"""Metrics read by the community conventions, never by the shipped scenarios' names (issue 23,
items 1 and 2): which names a symptom reads, which gauges have a limit, the PromQL of an error
ratio and of a saturation, and the names the derived series are shown (and recognised) by."""

from __future__ import annotations

import pytest

from pipeline.data.metric_names import (
    error_ratio_name,
    is_duration,
    is_error_ratio,
    saturation_name,
    saturation_of,
)
from pipeline.sources.conventions import error_ratio, saturation, saturation_pairs, select

SERVICE = ["db_pool_in_use", "db_pool_max", "http_request_duration_seconds_bucket",
           "http_request_duration_seconds_count", "http_request_duration_seconds_created",
           "http_request_duration_seconds_sum", "http_requests_created", "http_requests_total",
           "process_open_fds", "process_max_fds", "scrape_duration_seconds", "up"]


@pytest.mark.parametrize(("names", "pairs"), [
    (SERVICE, [("db_pool_in_use", "db_pool_max")]),
    (["queue_length", "queue_length_limit", "queue_length_capacity"],
     [("queue_length", "queue_length_capacity"), ("queue_length", "queue_length_limit")]),
    # the limit names the stem by its suffix: a `_max_` in the middle is no limit
    (["db_pool_active_connections", "db_pool_max_connections"], []),
    (["process_open_fds", "process_max_fds"], []),
    # counters have no limit, and a limit is no gauge of another limit
    (["jobs_total", "jobs_max"], []),
])
def test_saturation_pairs(names: list[str], pairs: list[tuple[str, str]]) -> None:
    assert saturation_pairs(names) == pairs


def test_select__an_errors_question_reads_error_ratios_resources_and_targets() -> None:
    signals = select(SERVICE, metric="error", status_named=["http_requests_total"])
    assert signals.error_ratios == ["http_requests_total"]
    assert signals.saturations == [("db_pool_in_use", "db_pool_max")]
    assert sorted(signals.gauges) == ["db_pool_in_use", "db_pool_max", "up"]
    assert signals.cumulative == []


def test_select__a_latency_question_reads_the_duration_histogram() -> None:
    signals = select(SERVICE, metric="latency", status_named=["http_requests_total"])
    assert signals.cumulative == ["http_request_duration_seconds_bucket"]
    assert signals.error_ratios == []


def test_select__without_a_symptom_everything_but_timestamps_and_bookkeeping() -> None:
    signals = select(SERVICE, metric=None, status_named=["http_requests_total"])
    read = {*signals.gauges, *signals.cumulative}
    assert "http_requests_created" not in read and "scrape_duration_seconds" not in read
    assert {"up", "db_pool_in_use", "http_requests_total",
            "http_request_duration_seconds_bucket"} <= read
    assert signals.error_ratios == ["http_requests_total"]


def test_select__a_word_keeps_the_names_containing_it() -> None:
    signals = select(["db_errors_total", "db_pool_in_use"], metric="error", status_named=[])
    assert signals.cumulative == ["db_errors_total"] and signals.gauges == []


def test_error_ratio__zero_without_errors_and_shown_by_its_name() -> None:
    query = error_ratio("http_requests_total", "code", 'job="checkout"', 20, "job")
    every = 'sum by (job) (rate({__name__="http_requests_total",job="checkout"}[20s]))'
    errors = ('sum by (job) (rate({__name__="http_requests_total",code=~"5..",'
              'job="checkout"}[20s]))')
    assert query.promql == f"({errors} or {every} * 0) / {every}"
    assert query.metric == error_ratio_name("http_requests_total", "code", 20)
    assert query.unit == "ratio" and is_error_ratio(query.metric)


def test_saturation__level_over_limit() -> None:
    query = saturation("db_pool_in_use", "db_pool_max", "", "service")
    assert query.promql == ('sum by (service) ({__name__="db_pool_in_use"}) / '
                            'sum by (service) ({__name__="db_pool_max"})')
    assert saturation_of(query.metric) == ("db_pool_in_use", "db_pool_max")


@pytest.mark.parametrize(("metric", "duration"), [
    ("histogram_quantile(0.95, rate(http_request_duration_seconds_bucket[20s]))", True),
    ("http_latency_p99_ms", True),
    ("rate(process_cpu_seconds_total[20s])", False),
    ("rate(http_request_duration_seconds_sum[20s])", False),
    ("db_pool_in_use", False),
])
def test_is_duration(metric: str, duration: bool) -> None:
    assert is_duration(metric) is duration


def test_recognisers_refuse_other_names() -> None:
    assert saturation_of("db_pool_in_use") is None
    assert saturation_of(saturation_name("a", "b")) is None  # `b` names no limit
    assert not is_error_ratio("rate(http_requests_total[20s])")


def test_kubernetes_families__memory_against_its_limit_and_crashes() -> None:
    """kube-state-metrics and cAdvisor name a container's limit and its restarts by their own
    families: a crash question reads them, and the memory limit is a saturation."""
    names = ["container_memory_working_set_bytes", "container_spec_memory_limit_bytes",
             "kube_pod_container_status_restarts_total",
             "kube_pod_container_status_last_terminated_reason", "container_oom_events_total",
             "go_goroutines"]
    signals = select(names, metric="memory", status_named=[])
    pair = ("container_memory_working_set_bytes", "container_spec_memory_limit_bytes")
    assert signals.saturations == [pair]
    assert saturation_of(saturation_name(*pair)) == pair
    assert "kube_pod_container_status_last_terminated_reason" in signals.gauges
    assert signals.cumulative == ["container_oom_events_total",
                                  "kube_pod_container_status_restarts_total"]
    assert "go_goroutines" not in signals.gauges
