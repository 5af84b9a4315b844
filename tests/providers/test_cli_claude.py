"""`verity run` and `verity show` as a user runs them with a key: the embedded default on the
Claude agents, over real HTTP to the project's fake Messages API server in another process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from tests.conftest import cli_env, run_verity

QUESTION = "Why is checkout-service returning 500s?"
ROLES = ("planner", "executor", "verifier", "composer", "knowledge")
RESPONDERS = {role: f"tests.providers.claude_like:{role}" for role in ROLES}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    with FakeAnthropic.spawn(script={"responders": RESPONDERS}, required_key="test-key",
                             record_limit=2000) as running:
        yield running


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return cli_env(tmp_path / "home", **extra)


def test_claude_run_has_the_offline_shape_with_tokens_and_cost(fake: Any, tmp_path: Path) -> None:
    claude = _env(tmp_path, VERITY_PROVIDER="anthropic", ANTHROPIC_API_KEY="test-key",
                  ANTHROPIC_BASE_URL=fake.base_url)
    done = run_verity("run", QUESTION, "--scenario", "checkout-pool-exhaustion", "--json",
                      env=claude)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    offline = json.loads(run_verity("run", QUESTION, "--scenario", "checkout-pool-exhaustion",
                                    "--json", env=_env(tmp_path)).stdout)
    assert list(result) == list(offline)
    assert (result["status"], result["verdict"]) == (offline["status"], offline["verdict"])
    assert result["final_answer"] == offline["final_answer"]
    shown = json.loads(run_verity("show", result["run_id"], "--json", env=claude).stdout)
    roles = {a["role"] for a in shown["attempts"]}
    assert {"planner", "executor", "verifier", "composer"} <= roles
    assert all(a["outcome"] == "ok" and a["input_tokens"] > 0 for a in shown["attempts"])
    assert shown["usage"]["input_tokens"] > 0 and shown["usage"]["cost_usd"] > 0
    human = run_verity("show", result["run_id"], env=claude)
    assert "Model attempts" in human.stdout and "total" in human.stdout


def test_rejected_key_is_one_line(fake: Any, tmp_path: Path) -> None:
    env = _env(tmp_path, VERITY_PROVIDER="anthropic", ANTHROPIC_API_KEY="wrong-key",
               ANTHROPIC_BASE_URL=fake.base_url)
    done = run_verity("run", QUESTION, "--scenario", "checkout-pool-exhaustion", env=env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len([line for line in lines if line.startswith("verity: error:")]) == 1
    assert "ANTHROPIC_API_KEY was rejected (401)" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_key_is_one_line(tmp_path: Path) -> None:
    env = _env(tmp_path, VERITY_PROVIDER="anthropic")
    done = run_verity("run", QUESTION, "--scenario", "checkout-pool-exhaustion", env=env)
    assert done.returncode != 0
    assert done.stderr.startswith("verity: error: ANTHROPIC_API_KEY")
    assert len(done.stderr.strip().splitlines()) == 1
