"""bench/grounding.py's core on the shipped loghub claim set: the targets hold, and the set is
what the script builds from the shipped lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import grounding  # noqa: E402


def test_grounding__the_shipped_claim_set_is_built_from_the_shipped_lines() -> None:
    assert grounding.build_claims() == grounding.load_claims()
    systems = {c.system for c in grounding.load_claims()}
    assert systems == set(grounding.SYSTEMS)


def test_grounding__post_check_targets() -> None:
    report = grounding.measure(grounding.load_claims())
    post = report["post_check"]
    # every swapped identifier, changed number (inside an identifier too) and changed unit is
    # caught by the post-check over a Verifier that says direct_observation to everything
    for label in grounding.PERTURBED:
        assert post[label]["all"]["caught_pct"] == 100.0, (label, report["post_check_missed"])
        assert post[label]["all"]["claims"] >= 8
    assert post["faithful"]["all"]["kept_pct"] >= 95.0, report["post_check_refused_faithful"]
    assert report["targets"]["met"] is True
    # every kind of fact is there, faithful and perturbed
    assert {"ip", "hex", "uuid", "block", "id", "path", "number", "kv", "quantity"} <= set(
        post["faithful"])
    assert "negation" in post and "negation" in report["offline"]
    # the offline Verifier holds to the same (it compares single digits of claims too)
    offline = report["offline"]
    assert offline["faithful"]["all"]["kept_pct"] >= 95.0
    assert all(offline[label]["all"]["caught_pct"] == 100.0 for label in grounding.PERTURBED)


def test_grounding__prints_one_json_object() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "grounding.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["benchmark"] == "grounding" and report["targets"]["met"] is True
