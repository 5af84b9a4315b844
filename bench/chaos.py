"""Chaos benchmark: the drills of `tests/chaos/` through the same harness, on a private Redis
and PostgreSQL started on free ports (the machine's own services are never touched).

Per drill: runs submitted, how they ended (by status), runs still not terminal when the drain
deadline passed, duplicates (runs ended more than once, tool rows duplicated or left
PROJECTING, attempt rows beyond the requests the fake server saw) and the drain time (seconds
from the end of the fault until every run was terminal; -1 when some never were). Target: 0
stuck and 0 duplicates in every drill (`meets_target`); `every_check_passed` also counts each
drill's own checks and requests the fake saw without an attempt row (`problems`). Prints one
JSON object; worker logs stay in the folder named on stderr.

    python bench/chaos.py [--drills redis_restart,worker_kills] [--runs 50] [--outage-s 45]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos.drills import DRILLS  # noqa: E402
from tests.chaos.harness import Cluster, Services  # noqa: E402


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    args = _arguments()
    logs = Path(tempfile.mkdtemp(prefix="verity-bench-chaos-"))
    log(f"logs in {logs}")
    drills: dict[str, Any] = {}
    with Services() as services:
        for name in args.drills:
            log(f"drill {name}: {args.runs} runs")
            started = time.monotonic()
            drills[name] = _drill(services, name, logs / name, args)
            drills[name]["wall_s"] = round(time.monotonic() - started, 1)
            log(f"  {json.dumps({k: drills[name].get(k) for k in _SHOWN})}")
    met = all(d.get("stuck_after_drain") == 0 and not any(d.get("duplicates", {"": 1}).values())
              for d in drills.values())
    clean = all(d.get("problems") == [] for d in drills.values())
    print(json.dumps({
        "benchmark": "chaos", "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
        "runs_per_drill": args.runs, "logs": str(logs), "drills": drills,
        "targets": {"stuck_after_drain": 0, "duplicates": 0}, "meets_target": met,
        "every_check_passed": clean,
    }, indent=2))


_SHOWN = ("ended_by_status", "stuck_after_drain", "duplicates", "drain_time_s")


def _drill(services: Services, name: str, log_dir: Path, args: argparse.Namespace) -> Any:
    options: dict[str, Any] = {"runs": args.runs}
    if name == "postgres_outage":
        options["outage_s"] = args.outage_s
    try:
        with Cluster(services, log_dir) as cluster:
            return DRILLS[name](cluster, **options).summary()
    except Exception as exc:  # a drill that cannot finish is a figure too, not the end
        return {"runs_submitted": args.runs, "error": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": traceback.format_exc()[-2000:]}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drills", default=",".join(DRILLS),
                        help=f"comma-separated, among {', '.join(DRILLS)}")
    parser.add_argument("--runs", type=int, default=50, help="runs per drill")
    parser.add_argument("--outage-s", type=float, default=45.0,
                        help="seconds PostgreSQL stays stopped")
    args = parser.parse_args()
    args.drills = [d.strip() for d in args.drills.split(",") if d.strip()]
    unknown = sorted(set(args.drills) - set(DRILLS))
    if unknown or args.runs < 1:
        parser.error(f"unknown drills {unknown}" if unknown else "--runs is at least 1")
    return args


if __name__ == "__main__":
    main()
