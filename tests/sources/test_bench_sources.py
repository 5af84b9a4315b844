"""bench/sources.py runs against the real servers and prints one JSON object of sane figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sources.prom_harness import missing_binaries, service_missing

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.prometheus


def test_bench_sources__prints_latency_and_bytes_per_tool() -> None:
    if missing_binaries():
        service_missing("Prometheus/Alertmanager", f"not installed: {missing_binaries()}")
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sources.py"), "--calls", "3"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    flood = report["loki"]["memory_1m_lines"]
    assert flood["returned"] == flood["limit"] == 5000 and flood["truncated"]
    assert flood["lines_sent_by_server"] < flood["lines_matching"]  # it stopped reading
    assert flood["peak_traced_mib"] < 32 and flood["bytes_read"] < flood["full_answer_bytes"] / 10
    figures = [report["prometheus"]["query_metrics"], report["prometheus"]["list_alerts"],
               report["alertmanager"]["list_alerts"], report["loki"]["search_logs"]]
    for one in figures:
        assert 0 < one["p50_ms"] <= one["p95_ms"] <= one["max_ms"]
        assert one["fetched_bytes"] > 0 and one["stored_bytes"] > 0
    # window and baseline: each the service's names (`/api/v1/label/__name__/values`), then
    # one query_range of its gauges (the scenarios' series are gauges, no counters)
    assert report["prometheus"]["query_metrics"]["requests_per_call"] == 4
    assert report["prometheus"]["query_metrics"]["stored_bytes"] < \
        report["prometheus"]["query_metrics"]["fetched_bytes"]
    assert report["prometheus"]["version"].startswith("2.")
