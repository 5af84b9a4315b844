"""`bench/gatekeeper.py` runs, prints exactly one JSON object, and its figures are sane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_smoke__gatekeeper_prints_one_json_object() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gatekeeper.py"),
         "--claims", "50", "--repeat", "1", "--min-time", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is one JSON object and nothing else
    assert {"python", "cpu_count", "pinned", "pinned_cpu", "repeat", "claims",
            "target_bindings_per_s", "gatekeeper", "verify_bundle"} <= set(report)
    assert report["repeat"] == 1 and report["claims"] == 50
    assert report["cpu_count"] >= 1
    assert report["pinned"] is (report["pinned_cpu"] is not None)

    valid, failing = report["gatekeeper"]["valid"], report["gatekeeper"]["failing"]
    for figures in (valid, failing):
        assert figures["claims"] == 50
        assert figures["bindings"] >= 50
        for key in ("bindings_per_s", "calls_per_s", "baseline_bindings_per_s",
                    "ratio_to_baseline"):
            assert figures[key] > 0, key
        assert isinstance(figures["meets_target"], bool)
    assert (valid["severity"], valid["failing_bindings"]) == ("pass", 0)
    assert failing["severity"] == "low_confid"
    assert failing["failing_bindings"] == failing["injected_failures"] > 0

    verify = report["verify_bundle"]
    samples = {path.name for path in (ROOT / "samples" / "bundles").glob("*.json")}
    assert set(verify) == samples | {"scaled_50_claims"}
    assert all(figures["bundles_per_s"] > 0 for figures in verify.values())
    assert (verify["scaled_50_claims"]["status"], verify["scaled_50_claims"]["verdict"]) == (
        "SUCCESS", "PASS"
    )
