"""`verity verify --provider anthropic`: a bundle re-judged by the Claude Verifier and Composer
over real HTTP to the fake Messages API server (ANTHROPIC_BASE_URL), as a user runs it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from pipeline.config import VeritySettings
from pipeline.prompts import load_prompt
from tests.conftest import cli_env, run_verity
from tests.providers import claude_like
from tests.providers.claude_like import answer_like_claude

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "samples" / "bundles"
KEY = "test-key"
pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(required_key=KEY) as running:
        answer_like_claude(running)
        yield running


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return cli_env(tmp_path / "home", **extra)


def _claude_env(tmp_path: Path, fake: FakeAnthropic) -> dict[str, str]:
    return _env(tmp_path, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.base_url)


def _one_object(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.count("\n") == 1
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _used(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    audit = result["self_evaluation"]["verifier_evaluation"]["prompt_audit"]
    return [(u["role"], u["name"], u["version"], u["model"]) for u in audit["used"]]


def strict_verifier(request: dict[str, Any]) -> dict[str, Any]:
    """A Verifier stricter than the offline one: it finds every claim unsupported."""
    answer = claude_like.verifier(request)
    judged = answer["tool_use"]["input"]
    judged["verdict"] = "REJECT"
    judged["claim_checks"] = [{**check, "verification": "unsupported"}
                              for check in judged["claim_checks"]]
    return answer


@pytest.mark.parametrize("bundle", ["pass.json", "low_confid_ceiling.json"])
def test_verify__claude_answering_like_claude_gives_the_offline_verdict(
    fake: FakeAnthropic, tmp_path: Path, bundle: str
) -> None:
    path = str(BUNDLES / bundle)
    offline = _one_object(run_verity("verify", path, "--json", env=_env(tmp_path)))
    claude = _one_object(run_verity("verify", path, "--json", "--provider", "anthropic",
                                    env=_claude_env(tmp_path, fake)))
    assert list(claude) == list(offline)
    assert (claude["status"], claude["verdict"], claude["fallback_type"]) == (
        offline["status"], offline["verdict"], offline["fallback_type"])
    assert claude["final_answer"] == offline["final_answer"]
    assert sorted({r["role"] for r in fake.requests}) == ["composer", "verifier"]
    defaults = VeritySettings.model_fields  # the subprocess sets no VERITY_MODEL_*
    assert _used(claude) == [
        ("composer", "verity.composer", load_prompt("composer").version,
         defaults["model_composer"].default),
        ("verifier", "verity.verifier", load_prompt("verifier").version,
         defaults["model_verifier"].default)]
    assert [m for *_, m in _used(offline)] == ["offline-template-composer-1",
                                               "offline-lexical-verifier-1"]


def test_verify__a_stricter_claude_verifier_changes_the_verdict(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.set_default_responder(strict_verifier, "verifier")
    path = str(BUNDLES / "pass.json")
    offline = _one_object(run_verity("verify", path, "--json", env=_env(tmp_path)))
    strict = _one_object(run_verity("verify", path, "--json", "--provider", "anthropic",
                                    env=_claude_env(tmp_path, fake)))
    assert (offline["status"], offline["verdict"]) == ("SUCCESS", "PASS")
    assert (strict["status"], strict["verdict"], strict["fallback_type"]) == (
        "FALLBACK", "REJECT", "SEMANTIC_UNSUPPORTED")
    evaluation = strict["self_evaluation"]["verifier_evaluation"]
    assert evaluation["model_verdict"] == "REJECT"
    assert {c["verification"] for c in evaluation["claim_checks"]} == {"unsupported"}
    assert [r["role"] for r in fake.requests] == ["verifier"]  # REJECT: nothing to compose


def test_verify__store_keeps_the_model_attempts_like_a_live_run(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    env = _claude_env(tmp_path, fake)
    stored = _one_object(run_verity("verify", str(BUNDLES / "pass.json"), "--json", "--store",
                                    "--provider", "anthropic", env=env))
    shown = _one_object(run_verity("show", stored["run_id"], "--json", env=env))
    attempts = shown["attempts"]
    assert sorted(a["role"] for a in attempts) == ["composer", "verifier"]
    assert len(attempts) == len(fake.requests)
    assert all(a["outcome"] == "ok" and a["input_tokens"] > 0 and a["cost_usd"] > 0
               for a in attempts)
    assert {a["model"] for a in attempts} == {m for *_, m in _used(stored)}
    assert shown["usage"]["input_tokens"] > 0
    assert shown["self_evaluation"] == stored["self_evaluation"]


def test_verify__missing_key_is_one_line_exit_2_and_nothing_stored(tmp_path: Path) -> None:
    done = run_verity("verify", str(BUNDLES / "pass.json"), "--json", "--store",
                      "--provider", "anthropic", env=_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("verity: error: ANTHROPIC_API_KEY is not set")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()  # no database was even opened


def test_verify__the_default_stays_offline_with_a_key_set(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    """The shipped bundles' expectations are the offline agents'; a key in the environment
    does not send `verity verify` to the network."""
    done = _one_object(run_verity("verify", str(BUNDLES / "pass.json"), "--json",
                                  env=_claude_env(tmp_path, fake)))
    assert (done["status"], done["verdict"]) == ("SUCCESS", "PASS")
    assert fake.requests == []
    assert {m for *_, m in _used(done)} == {"offline-template-composer-1",
                                            "offline-lexical-verifier-1"}


def test_verify__a_rejected_key_is_one_line(fake: FakeAnthropic, tmp_path: Path) -> None:
    env = _env(tmp_path, ANTHROPIC_API_KEY="wrong-key", ANTHROPIC_BASE_URL=fake.base_url)
    done = run_verity("verify", str(BUNDLES / "pass.json"), "--store", "--provider", "anthropic",
                      env=env)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.startswith("verity: error: ") and "(401)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "home").exists()


def test_verify__an_unknown_provider_is_one_line_exit_2(tmp_path: Path) -> None:
    done = run_verity("verify", str(BUNDLES / "pass.json"), "--provider", "openai",
                      env=_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("verity: error: ") and "'offline', 'anthropic'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
