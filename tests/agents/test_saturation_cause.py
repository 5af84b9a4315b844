"""A gauge at its limit is named as the cause only when timing and values support it (issue 23,
item 2): it left its baseline no later than the symptom did and stood at its limit when the
symptom peaked. The series go through the real `query_metrics` tool over a small in-memory
source, so the investigator reads projections exactly as a live run stores them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from models.agent import ToolCallRequest
from models.executor import ClaimKind
from pipeline.agents.investigator import build_output
from pipeline.data.records import MetricSeries
from pipeline.data.source import Fetched, MetricQuery
from pipeline.tools import default_registry, run_tool
from pipeline.tools.analysis import Findings
from pipeline.tools.views import CallView

NOW = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)
SATURATION = "db_pool_in_use / db_pool_max"
ERRORS = 'rate(http_requests_total{code=~"5.."}[20s]) / rate(http_requests_total[20s])'
LATENCY = "histogram_quantile(0.95, rate(http_request_duration_seconds_bucket[20s]))"


@dataclass
class _Source:
    """The DataSource methods `query_metrics` uses: series every 10 s up to NOW, no history
    before them (so their first points stand in for the baseline)."""

    series: dict[str, list[float]]
    name: str = "memory"
    now: datetime = NOW

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        found = []
        for metric, values in self.series.items():
            start = NOW - timedelta(seconds=10 * (len(values) - 1))
            times = [start + timedelta(seconds=10 * i) for i in range(len(values))]
            kept = [(t, v) for t, v in zip(times, values, strict=True)
                    if query.start <= t <= query.end]
            if kept:
                found.append(MetricSeries(service="checkout", metric=metric, unit="ratio",
                                          times=[t for t, _ in kept],
                                          values=[v for _, v in kept]))
        return Fetched(items=found, total=len(found))


def _claims(series: dict[str, list[float]]) -> dict[ClaimKind, list[str]]:
    request = ToolCallRequest(tool_call_id="toolu_01SATURATIONxxxxxxxxxxx",
                              tool_name="query_metrics", arguments={"service": "checkout"})
    invocation = run_tool(default_registry(), request, source=_Source(series),  # type: ignore[arg-type]
                          max_items=50, max_bytes=65536)
    output = build_output(Findings([CallView(invocation)], focus="checkout"))
    assert output.dropped == []
    kinds: dict[ClaimKind, list[str]] = {}
    for claim in output.output.claims:
        kinds.setdefault(claim.kind, []).append(claim.text)
    return kinds


def test_a_pool_that_filled_as_the_errors_began_is_the_cause() -> None:
    claims = _claims({SATURATION: [0.1] * 12 + [0.5, 1, 1, 1, 1, 1, 1, 1],
                      ERRORS: [0.0] * 13 + [1.0] * 7})
    [root] = claims[ClaimKind.ROOT_CAUSE]
    assert root.startswith("db_pool_in_use of checkout reached db_pool_max and caused")
    assert SATURATION in root and ERRORS in root


def test_a_pool_that_filled_after_the_errors_began_is_not_blamed() -> None:
    claims = _claims({SATURATION: [0.1] * 15 + [1, 1, 1, 1, 1],
                      ERRORS: [0.0] * 12 + [1.0] * 8})
    assert ClaimKind.ROOT_CAUSE not in claims


def test_an_earlier_episode_in_the_window_explains_no_later_slowness() -> None:
    """The pool leaked and recovered; later the requests slowed with the pool at a tenth."""
    claims = _claims({SATURATION: [0.1] * 10 + [1.0] * 6 + [0.1] * 24,
                      LATENCY: [0.07] * 10 + [0.45] * 6 + [0.07] * 8 + [0.7] * 16})
    assert ClaimKind.ROOT_CAUSE not in claims
    assert any(LATENCY in text for text in claims[ClaimKind.FINDING])


def test_a_pool_below_its_limit_is_not_blamed() -> None:
    claims = _claims({SATURATION: [0.1] * 12 + [0.6] * 8, ERRORS: [0.0] * 12 + [1.0] * 8})
    assert ClaimKind.ROOT_CAUSE not in claims


def test_a_pool_episode_that_peaked_higher_does_not_explain_a_later_one() -> None:
    """The live timeline: the pool leak raised p95 higher (requests waited for a connection)
    than the later slowness did, so the peaks line up with the pool; the pool is over while
    the slowness goes on."""
    claims = _claims({SATURATION: [0.1] * 10 + [1.0] * 6 + [0.1] * 24,
                      LATENCY: [0.07] * 10 + [0.66] * 6 + [0.07] * 8 + [0.6] * 16})
    assert ClaimKind.ROOT_CAUSE not in claims


def test_a_service_the_source_does_not_know_is_not_called_quiet() -> None:
    """issue 23 (5): asking about a name no series carries answered "No metrics were found
    ... No action is indicated"."""
    note = ("no series matched billing through the labels job, service; the job label has "
            "checkout, node-exporter")

    @dataclass
    class Unknown(_Source):
        def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
            return Fetched(items=[], total=0, note=note)

    request = ToolCallRequest(tool_call_id="toolu_01UNMATCHEDxxxxxxxxxxxxx",
                              tool_name="query_metrics", arguments={"service": "billing"})
    invocation = run_tool(default_registry(), request, source=Unknown({}),  # type: ignore[arg-type]
                          max_items=50, max_bytes=65536)
    assert invocation.projection is not None and invocation.projection.scope.note == note
    made = build_output(Findings([CallView(invocation)], focus="billing"))
    assert made.dropped == []
    [claim] = made.output.claims
    assert claim.text == f"No metrics were found for billing: {note}" and not claim.critical
    assert "The metrics of billing were not checked: no series matched billing." in (
        made.output.missing_info)
    assert not any(a.text.startswith("No action is indicated")
                   for a in made.output.recommended_actions)


def test_a_target_down_for_two_scrapes_is_a_finding() -> None:
    """issue 23 (2): "why is node-exporter down" never read `up`; a target down for less than
    the 5 points a shift needs is still down."""
    claims = _claims({"up": [1.0] * 20 + [0.0, 0.0]})
    [finding] = claims[ClaimKind.FINDING]
    assert finding.startswith("up of checkout: ") and "low 0 at " in finding
