"""`query_metrics`: each series in a window against a baseline window, in words and numbers.

The baseline defaults to the window of the same length just before the queried one. A series
has *shifted* when a 5-point rolling median leaves the baseline band (beyond 4 standard
deviations, 10% past the baseline extreme and, upwards, 20% above the mean); the first point of
that run is the onset. Single-point spikes do not count.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from models.invocation import QueryScope
from pipeline.data.metric_names import is_target
from pipeline.data.records import MetricSeries, iso
from pipeline.data.source import MetricQuery
from pipeline.tools.formatting import format_value, rounded
from pipeline.tools.source import (
    ToolOutput,
    WindowArg,
    WindowedArgs,
    time_window,
)

if TYPE_CHECKING:
    from pipeline.data.source import DataSource

ROLLING = 5
STAND_IN_SHARE = 4
"""Without baseline data, the window's first quarter (at least ROLLING points) stands in."""
MAX_POINTS = 12
DESCRIPTION = (
    "Query the metric series of a service in a time window and compare each with a baseline "
    "window (default: the window of equal length just before). `metric` keeps series whose name "
    "contains it (e.g. 'error', 'latency', 'memory'); omit it for every series of the service. "
    "Per series: unit, baseline and window statistics, peak and its time, whether and when it "
    "shifted from the baseline, a one-line summary with units, and downsampled points."
)


class QueryMetricsArgs(WindowedArgs):
    """Arguments of query_metrics."""

    service: str | None = Field(default=None, description="Service; all services if omitted.")
    metric: str | None = Field(
        default=None, max_length=100, description="Substring of the metric name."
    )
    baseline: WindowArg | None = Field(
        default=None, description="Baseline window; default the equal window just before."
    )


@dataclass(frozen=True, slots=True)
class _Stats:
    mean: float
    stdev: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> _Stats:
        return cls(statistics.fmean(values), statistics.pstdev(values), min(values), max(values))


def query_metrics(source: DataSource, args: QueryMetricsArgs) -> ToolOutput:
    """Run one metrics query: the window and, as a second query, the baseline window; series
    are paired by (service, metric)."""
    start, end = args.resolve(source.now)
    if args.baseline is not None:
        base_start, base_end = args.baseline.start, args.baseline.end
    else:
        base_start, base_end = start - (end - start), start
    fetched = source.query_metrics(MetricQuery(start=start, end=end, service=args.service,
                                               metric=args.metric))
    baseline = source.query_metrics(MetricQuery(start=base_start, end=base_end,
                                                service=args.service, metric=args.metric))
    base_by_key = {(s.service, s.metric): s for s in baseline.items}
    series = []
    for one in fetched.items:
        described = _describe(one, base_by_key.get((one.service, one.metric)),
                              (start, end), (base_start, base_end),
                              stand_in=args.baseline is None)
        if described is not None:
            series.append(described)
    series.sort(key=lambda s: (s["shift"] == "none", s["service"], s["metric"]))
    window = time_window(start, end)
    shifted = [f"{s['metric']} of {s['service']} ({s['shift']})" for s in series
               if s["shift"] not in ("none", "unknown")]
    names = ", ".join(f"{s['metric']} of {s['service']}" for s in series)
    summary = (
        f"{len(series)} series ({names}) between {window.start} and {window.end}; "
        + (f"shifted from baseline: {', '.join(shifted)}" if shifted
           else "none shifted from baseline")
    )
    scope = QueryScope(
        service=args.service, window=window,
        filter=f'metric contains "{args.metric}"' if args.metric else "all metrics",
        queries=[*fetched.queries, *baseline.queries] or None, note=fetched.note or None,
    )
    return ToolOutput(result={"summary": summary, "series": series}, scope=scope,
                      found=bool(series))


def _slice(series: MetricSeries, start: datetime, end: datetime) -> tuple[int, int]:
    return bisect.bisect_left(series.times, start), bisect.bisect_right(series.times, end)


def _describe(
    series: MetricSeries, base_series: MetricSeries | None,
    window: tuple[datetime, datetime], baseline: tuple[datetime, datetime], *,
    stand_in: bool = True,
) -> dict[str, Any] | None:
    """A series in words and numbers against its baseline; with `stand_in` and no baseline
    data, the first STAND_IN_SHARE of its points in the window stand in for the baseline
    (a source holding less history than the baseline window: a new service, a new metric)
    and the rest is compared with them, which the summary says."""
    lo, hi = _slice(series, *window)
    if lo >= hi:
        return None
    times, values = series.times[lo:hi], series.values[lo:hi]
    b_lo, b_hi = _slice(base_series, *baseline) if base_series is not None else (0, 0)
    base = (_Stats.of(base_series.values[b_lo:b_hi])
            if base_series is not None and b_lo < b_hi else None)
    own = False
    if base is None and stand_in and len(values) >= 2 * ROLLING:
        # no data before the window: its own first points stand in for the baseline
        cut = max(ROLLING, len(values) // STAND_IN_SHARE)
        base, own = _Stats.of(values[:cut]), True
        baseline = (times[0], times[cut - 1])
        times, values = times[cut:], values[cut:]
    now = _Stats.of(values)
    peak_index = max(range(len(values)), key=values.__getitem__)
    low_index = min(range(len(values)), key=values.__getitem__)
    shift, onset_index = _shift(values, base)
    onset = times[onset_index] if onset_index is not None else None
    unit = series.unit

    def fmt(value: float) -> str:
        return format_value(value, unit)

    name = f"{series.metric} of {series.service}"
    if base is None:
        baseline_text = "no baseline data"
    else:
        baseline_text = (f"baseline mean {fmt(base.mean)} (max {fmt(base.high)}) between "
                         f"{iso(baseline[0])} and {iso(baseline[1])}")
        if own:
            baseline_text += " (its first points: no data before the window)"
    # a scrape target that went down is its low, however briefly: 0 is a target not answering
    down = is_target(series.metric) and values[low_index] == 0
    extreme = (f"low {fmt(values[low_index])} at {iso(times[low_index])}"
               if shift == "down" or down
               else f"peak {fmt(values[peak_index])} at {iso(times[peak_index])}")
    if onset is not None:
        verdict = f"shifted {shift} from baseline at {iso(onset)}"
    elif shift == "none":
        verdict = "no shift from baseline"
    else:
        verdict = "shift unknown without baseline"
    summary = f"{name}: {baseline_text}; in window mean {fmt(now.mean)}, {extreme}; {verdict}"
    return {
        "service": series.service,
        "metric": series.metric,
        "unit": unit,
        "baseline": _stats_json(base, baseline) if base else None,
        "window": _stats_json(now, window),
        "peak": rounded(values[peak_index]),
        "peak_at": iso(times[peak_index]),
        "low": rounded(values[low_index]),
        "low_at": iso(times[low_index]),
        "shift": shift,
        "onset": iso(onset) if onset else None,
        "summary": summary,
        "points": _downsample(times, values),
    } | ({"baseline_in_window": True} if own else {})


def _stats_json(stats: _Stats, window: tuple[datetime, datetime]) -> dict[str, Any]:
    return {"start": iso(window[0]), "end": iso(window[1]), "mean": rounded(stats.mean),
            "stdev": rounded(stats.stdev), "min": rounded(stats.low), "max": rounded(stats.high)}


def _shift(values: Sequence[float], base: _Stats | None) -> tuple[str, int | None]:
    """Direction of a sustained departure from the baseline band, and its first index.

    When a series leaves the band on both sides (a sawtooth), the larger departure wins.
    """
    if base is None:
        return "unknown", None
    upper = max(base.mean + 4 * base.stdev, base.high + 0.1 * abs(base.high),
                base.mean + 0.2 * abs(base.mean))
    lower = min(base.mean - 4 * base.stdev, base.low - 0.1 * abs(base.low))
    up = _first_run(values, lambda v: v > upper)
    down = _first_run(values, lambda v: v < lower) if base.low > 0 else None
    if up is not None and down is not None:
        if max(values) - base.mean >= base.mean - min(values):
            down = None
        else:
            up = None
    if up is not None:
        return "up", up
    if down is not None:
        return "down", down
    return "none", None


def _first_run(values: Sequence[float], outside: Callable[[float], bool]) -> int | None:
    """First index of the first ROLLING-point run whose median lies outside the band."""
    for index in range(max(len(values) - ROLLING + 1, 1)):
        run = values[index: index + ROLLING]
        if outside(statistics.median(run)):
            return index + next(i for i, v in enumerate(run) if outside(v))
    return None


def _downsample(times: Sequence[datetime], values: Sequence[float]) -> list[list[Any]]:
    """At most MAX_POINTS buckets: [bucket start, bucket mean]."""
    size = max(1, -(-len(values) // MAX_POINTS))
    return [
        [iso(times[i]), rounded(statistics.fmean(values[i: i + size]))]
        for i in range(0, len(values), size)
    ]
