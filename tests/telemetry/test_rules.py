"""The shipped alerting rules on Verity's own metrics pass `promtool check rules`, and their
unit tests (`verity-rules.test.yml`: runs stuck, fallback ratio, model error ratio, delivery
failures) pass `promtool test rules`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"

pytestmark = pytest.mark.prometheus


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:  # a missing tool fails under CI, as a service does
        message = "promtool is not installed (scripts/ensure_prometheus.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return subprocess.run(["promtool", *args], cwd=RULES, capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_rules__pass_promtool_check() -> None:
    done = promtool("check", "rules", "verity-rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_the_rules__pass_their_unit_tests() -> None:
    done = promtool("test", "rules", "verity-rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    tests = (RULES / "verity-rules.test.yml").read_text()
    for alert in ("VerityRunsStuck", "VerityFallbackRatioHigh", "VerityModelErrorRatioHigh",
                  "VerityDeliveryFailures"):
        assert f"alertname: {alert}" in tests, alert
