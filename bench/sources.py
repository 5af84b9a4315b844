"""Sources benchmark: the tools' queries against real Prometheus and Alertmanager servers.

Starts the servers of the sources tests (tests/sources/prom_harness.py) with one shipped
scenario, then per tool times `--calls` tool calls answered by one backend (after a few
warm-up calls) and compares the bytes the backend read off the wire for one call
(`Fetched.fetched_bytes`) with the bytes the tool stores (the JSON of its result,
`stored_bytes`) and, for reference, the JSON of the mapped records (`records_bytes`). Prints
one JSON object.

    python bench/sources.py [--calls 50] [--scenario checkout-pool-exhaustion]

A `query_metrics` call asks for the window (the tool's default two hours before the
scenario's `now`) and the baseline window before it, two `query_range` requests. A
`list_alerts` call is one backend's answer for the window. Each backend has one function
(`bench_prometheus`, `bench_alertmanager`, `bench_loki`). Loki has no server package here:
`search_logs` is timed against the Loki replay of the tests (`tests/sources/replay.py`), and
`memory_1m_lines` is the peak memory of a search whose query matches 1,000,000 lines
(`bench/sources_loki.py`: the connector streams and stops at the limit).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.data.records import Alert, LogEntry, MetricSeries, iso  # noqa: E402
from pipeline.data.source import AlertQuery, Fetched, LogQuery, MetricQuery  # noqa: E402
from pipeline.scenarios import load_scenario  # noqa: E402
from pipeline.sources.alertmanager import Alertmanager  # noqa: E402
from pipeline.sources.config import LokiBackend  # noqa: E402
from pipeline.sources.loki import Loki  # noqa: E402
from pipeline.sources.prometheus import Prometheus  # noqa: E402
from pipeline.tools.changes import ListAlertsArgs, list_alerts  # noqa: E402
from pipeline.tools.logs import SearchLogsArgs, search_logs  # noqa: E402
from pipeline.tools.metrics import QueryMetricsArgs, query_metrics  # noqa: E402
from pipeline.tools.source import ToolOutput  # noqa: E402
from tests.sources.prom_harness import PromStack  # noqa: E402

WARMUP = 3


class _Recorded:
    """The tools' `DataSource` over one backend, pinned at `now`, keeping every answer the
    tool received (what came off the wire, and the queries run)."""

    def __init__(self, backend: Any, now: datetime) -> None:
        self.backend, self.now, self.name = backend, now, "bench"
        self.answers: list[Fetched[Any]] = []

    def query_metrics(self, query: MetricQuery) -> Fetched[MetricSeries]:
        return self._keep(self.backend.query_metrics(query))

    def list_alerts(self, query: AlertQuery) -> Fetched[Alert]:
        return self._keep(self.backend.list_alerts(query))

    def search_logs(self, query: LogQuery) -> Fetched[LogEntry]:
        return self._keep(self.backend.search_logs(query))

    def _keep(self, fetched: Fetched[Any]) -> Fetched[Any]:
        self.answers.append(fetched)
        return fetched


def _tool_calls(calls: int, source: _Recorded, tool: Callable[[], ToolOutput]
                ) -> tuple[list[float], list[Fetched[Any]], ToolOutput]:
    """Time `calls` tool calls (after the warm-up); the last call's answers and output."""
    for _ in range(WARMUP):
        tool()
    latencies: list[float] = []
    output = None
    for _ in range(calls):
        source.answers.clear()
        began = time.perf_counter()
        output = tool()
        latencies.append((time.perf_counter() - began) * 1000)
    assert output is not None
    return latencies, list(source.answers), output


def _latency(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(p95, 3),
            "max_ms": round(ordered[-1], 3)}


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def _merge(parts: Sequence[Fetched[MetricSeries]]) -> list[MetricSeries]:
    merged: dict[tuple[str, str], MetricSeries] = {}
    for part in parts:
        for one in part.items:
            into = merged.setdefault((one.service, one.metric),
                                     MetricSeries(one.service, one.metric, one.unit))
            into.times += one.times
            into.values += one.values
    for one in merged.values():
        order = sorted(range(len(one.times)), key=one.times.__getitem__)
        one.times = [one.times[i] for i in order]
        one.values = [one.values[i] for i in order]
    return list(merged.values())


def _figures(latencies: list[float], fetched: list[Fetched[Any]], records: Any,
             stored: dict[str, Any]) -> dict[str, Any]:
    wire = sum(f.fetched_bytes for f in fetched)
    stored_bytes = _size(stored)
    return {**_latency(latencies), "requests_per_call": sum(len(f.queries) for f in fetched),
            "fetched_bytes": wire, "records_bytes": _size(records),
            "stored_bytes": stored_bytes,
            "stored_over_fetched": round(stored_bytes / wire, 4) if wire else None,
            "queries": [q for f in fetched for q in f.queries]}


def bench_prometheus(stack: PromStack, scenario: str, calls: int) -> dict[str, Any]:
    """query_metrics (window + baseline) and list_alerts (ALERTS history) on Prometheus."""
    data = stack.scenarios[scenario]
    backend = Prometheus("bench", stack.prometheus_config())
    source = _Recorded(backend, data.now)
    try:
        m_ms, m_fetched, m_tool = _tool_calls(calls, source, lambda: query_metrics(
            source, QueryMetricsArgs(service=data.meta.service)))
        series = _merge(m_fetched)
        a_ms, a_fetched, a_tool = _tool_calls(calls, source, lambda: list_alerts(
            source, ListAlertsArgs()))
        return {
            "version": backend.check().version,
            "query_metrics": _figures(m_ms, m_fetched, [_series_json(s) for s in series],
                                      m_tool.result),
            "list_alerts": _figures(a_ms, a_fetched, _alerts_json(a_fetched), a_tool.result),
        }
    finally:
        backend.close()


def bench_alertmanager(stack: PromStack, scenario: str, calls: int) -> dict[str, Any]:
    """list_alerts on Alertmanager's v2 API."""
    backend = Alertmanager("bench", stack.alertmanager_config(scenario))
    source = _Recorded(backend, stack.scenarios[scenario].now)
    try:
        ms, fetched, tool = _tool_calls(calls, source, lambda: list_alerts(
            source, ListAlertsArgs()))
        return {"version": backend.check().version,
                "list_alerts": _figures(ms, fetched, _alerts_json(fetched), tool.result)}
    finally:
        backend.close()


def _alerts_json(fetched: list[Fetched[Any]]) -> list[dict[str, Any]]:
    return [a.model_dump(mode="json") for f in fetched for a in f.items]


def bench_loki(calls: int, scenario: str) -> dict[str, Any]:
    """search_logs on the Loki replay (no Loki server package here: the connector's wire
    format against `tests/sources/replay.py`), and the peak memory of a query matching
    1,000,000 lines (the source streams the answer and stops at the limit)."""
    from bench.sources_loki import loki_memory
    from pipeline.scenarios import default_scenarios_dir
    from tests.sources.replay import LokiReplay

    folder = default_scenarios_dir() / scenario
    data = load_scenario(folder)
    with LokiReplay(folder) as replay:
        backend = Loki("bench", LokiBackend(url=replay.url, service_selector='{app="{service}"}'))
        source = _Recorded(backend, data.now)
        try:
            ms, fetched, tool = _tool_calls(calls, source, lambda: search_logs(
                source, SearchLogsArgs(service=data.meta.service, level="ERROR")))
        finally:
            backend.close()
    entries = [{"ts": e.ts, "service": e.service, "level": e.level, "message": e.message}
               for f in fetched for e in f.items]
    return {"search_logs": _figures(ms, fetched, entries, tool.result),
            "memory_1m_lines": loki_memory()}


def _series_json(series: MetricSeries) -> dict[str, Any]:
    one = asdict(series)
    one["times"] = [iso(t) for t in series.times]
    return one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--scenario", default="checkout-pool-exhaustion")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    with PromStack.start([args.scenario]) as stack:
        started_s = time.perf_counter() - began
        report = {
            "scenario": args.scenario, "calls": args.calls, "warmup": WARMUP,
            "servers_start_s": round(started_s, 2),
            "prometheus": bench_prometheus(stack, args.scenario, args.calls),
            "alertmanager": bench_alertmanager(stack, args.scenario, args.calls),
            "loki": bench_loki(args.calls, args.scenario),
        }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
