"""Memory of a Loki log search whose query matches 1,000,000 lines: the connector streams the
answer and stops at the limit, so what it holds stays bounded.

A replay Loki (`tests/sources/replay.py` `LokiFlood`) generates the lines as it sends them and
ignores `limit` (as an unbounded proxy would), so the bound measured is the connector's own.
Peak memory is traced with tracemalloc around `search_logs` (the replay's thread included).
Prints one JSON object.

    python bench/sources_loki.py [--lines 1000000] [--limit 5000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.data.source import LogQuery  # noqa: E402
from pipeline.sources.config import LokiBackend  # noqa: E402
from pipeline.sources.loki import Loki  # noqa: E402
from tests.sources.replay import LokiFlood, flood_process  # noqa: E402


def loki_memory(lines: int = 1_000_000, limit: int = 5000) -> dict[str, Any]:
    """Search a flood of `lines` matching lines for `limit` of them; the figures."""
    with flood_process(lines) as url:
        loki = Loki("bench", LokiBackend(url=url, timeout_s=120))
        start = datetime.fromtimestamp(LokiFlood.start_ns / 1e9, UTC)
        query = LogQuery(start=start, end=start + timedelta(milliseconds=lines), service="flood",
                         min_level="ERROR", terms=("timeout",), limit=limit)
        tracemalloc.start()
        began = time.perf_counter()
        try:
            fetched = loki.search_logs(query)
            seconds = time.perf_counter() - began
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            loki.close()
        sent = httpx.get(f"{url}/replay/stats").json()["lines_sent"]
    one = len(json.dumps([str(LokiFlood.start_ns), _sample_line()])) + 1
    return {
        "lines_matching": lines, "limit": limit, "returned": len(fetched.items),
        "total": fetched.total, "truncated": fetched.truncated,
        "lines_sent_by_server": sent, "bytes_read": fetched.fetched_bytes,
        "full_answer_bytes": one * lines,
        "peak_traced_mib": round(peak / 2**20, 2), "seconds": round(seconds, 2),
    }


def _sample_line() -> str:
    return "request r-0000000 failed: upstream timeout after 3 s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--limit", type=int, default=5000)
    args = parser.parse_args()
    print(json.dumps(loki_memory(args.lines, args.limit)))


if __name__ == "__main__":
    main()
