"""The Claude claim extractor on the real path: `verity check-answer --provider anthropic` (and
`verity import`) over HTTP to the fake Messages API server (ANTHROPIC_BASE_URL), the Verifier
and Composer answering like the offline ones. A faithful extraction gives the splitter's spans;
an invented claim is nowhere in the report; an unusable reply falls back to the splitter, and
the report says so."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from models.extractor import ExtractorOutput
from pipeline.agents.views import answer_schema
from pipeline.checks import check
from pipeline.config import VeritySettings
from pipeline.factory import claude_agents, claude_extractor
from pipeline.importers.files import parse_files
from pipeline.prompts import load_prompt
from pipeline.providers.anthropic import AnthropicProvider
from pipeline.rules.prose import split_claims
from pipeline.run.attempts import Retrying
from tests.conftest import cli_env, run_verity
from tests.providers.claude_like import answer_like_claude

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "tests" / "importers" / "data" / "anthropic_checkout_500s.json"
KEY = "test-key"
INVENTED = "The root cause is a DNS outage."
FALLBACK = "claims split by the deterministic splitter: "
pytestmark = pytest.mark.slow

ANSWER = """## Summary
checkout-service has returned HTTP 500s since 14:03 UTC because its payment-db pool is exhausted.

## Evidence
- 512 ERROR lines from checkout-service say "payment-db connection pool exhausted (max 20)".
- Deploy v2.3.1 of checkout-service went out at 14:01 UTC.
- No alerts fired for payment-db.

| service | version | pool |
|---|---|---|
| checkout-service | v2.3.1 | 20 |

## Root cause
The v2.3.1 deploy cut the payment-db pool from 50 to 20 connections.

## Next steps
1. Roll back checkout-service to v2.3.0.
"""
LOG = ("2026-11-30T14:03:12Z ERROR checkout-service payment-db connection pool exhausted "
       "(max 20): timed out after 5000 ms\n") * 3
DEPLOYS = {"deployments": [{"service": "checkout-service", "version": "v2.3.1",
                            "at": "2026-11-30T14:01:00Z",
                            "change": "reduce payment-db connection pool size from 50 to 20"}]}


def _answer_of(request: dict[str, Any]) -> str:
    text = "\n".join(b.get("text", "") for b in request["messages"][0]["content"]
                     if b.get("type") == "text")
    framed = text.split("<extractor_input>\n", 1)[1].rsplit("\n</extractor_input>", 1)[0]
    return framed.replace("<\\/", "</")


def _claims(answer: str) -> list[dict[str, Any]]:
    return [{"text": c.text, "kind": c.kind.value, "hedged": c.hedged, "action": c.action,
             "critical": c.critical} for c in split_claims(answer)]


def faithful(request: dict[str, Any]) -> dict[str, Any]:
    """An extractor that reads the answer as the splitter does."""
    return {"tool_use": {"name": "submit_claims",
                         "input": {"claims": _claims(_answer_of(request))}}}


def inventing(request: dict[str, Any]) -> dict[str, Any]:
    """A faithful extractor that also states a root cause the answer never gives."""
    claims = _claims(_answer_of(request))
    claims.insert(0, {"text": INVENTED, "kind": "ROOT_CAUSE", "hedged": False,
                      "action": False, "critical": True})
    return {"tool_use": {"name": "submit_claims", "input": {"claims": claims}}}


def chatty(request: dict[str, Any]) -> dict[str, Any]:
    """An extractor that answers in prose instead of the answer tool."""
    return {"text": "Here are the claims: " + json.dumps(_claims(_answer_of(request)))}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(required_key=KEY) as running:
        answer_like_claude(running)
        yield running


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "answer.md").write_text(ANSWER, encoding="utf-8")
    (tmp_path / "checkout-service.log").write_text(LOG, encoding="utf-8")
    (tmp_path / "deployments.json").write_text(json.dumps(DEPLOYS), encoding="utf-8")
    return ["--answer", str(tmp_path / "answer.md"),
            "--evidence", str(tmp_path / "checkout-service.log"),
            "--evidence", str(tmp_path / "deployments.json")]


def _env(tmp_path: Path, fake: FakeAnthropic | None = None) -> dict[str, str]:
    home = tmp_path / "home"
    if fake is None:
        return cli_env(home)
    return cli_env(home, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=fake.base_url)


def _report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _spans(report: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(c["span"][0], c["span"][1], c["text"]) for c in report["claims"]]


def _roles(fake: FakeAnthropic) -> list[str]:
    return [r["role"] for r in fake.requests]


def _offline(files: list[str], tmp_path: Path) -> dict[str, Any]:
    done = run_verity("check-answer", *files, "--json", env=_env(tmp_path))
    assert done.stderr == ""
    return _report(done)


def _claude(fake: FakeAnthropic, files: list[str], tmp_path: Path,
            extractor: Callable[[dict[str, Any]], dict[str, Any]]
            ) -> subprocess.CompletedProcess[str]:
    fake.set_default_responder(extractor, "extractor")
    return run_verity("check-answer", *files, "--json", "--provider", "anthropic",
                      env=_env(tmp_path, fake))


def _compared(fake: FakeAnthropic, files: list[str], tmp_path: Path,
              extractor: Callable[[dict[str, Any]], dict[str, Any]]
              ) -> tuple[dict[str, Any], dict[str, Any], subprocess.CompletedProcess[str]]:
    """The offline report, then the report and the process of the run with `extractor`."""
    offline = _offline(files, tmp_path)
    done = _claude(fake, files, tmp_path, extractor)
    return offline, _report(done), done


def test_extractor__a_faithful_extraction_gives_the_splitters_spans(
    fake: FakeAnthropic, files: list[str], tmp_path: Path
) -> None:
    offline, claude, done = _compared(fake, files, tmp_path, faithful)
    assert done.stderr == ""
    assert _spans(claude) == _spans(offline) and len(claude["claims"]) == 7
    for start, end, text in _spans(claude):
        assert ANSWER[start:end] == text
    assert [(c["kind"], c["critical"], c["action"]) for c in claude["claims"]] == [
        (c["kind"], c["critical"], c["action"]) for c in offline["claims"]]
    assert (claude["verdict"], claude["status"]) == (offline["verdict"], offline["status"])
    assert _roles(fake)[0] == "extractor" and _roles(fake).count("extractor") == 1
    (request,) = [r["body"] for r in fake.requests if r["role"] == "extractor"]
    assert request["model"] == VeritySettings.model_fields["model_extractor"].default
    assert request["system"][0]["text"] == load_prompt("extractor").text
    assert [t["name"] for t in request["tools"]] == ["submit_claims"]
    assert request["tools"][0]["input_schema"] == answer_schema(ExtractorOutput)
    assert _answer_of(request) == ANSWER


def test_extractor__an_invented_claim_is_nowhere_in_the_report(
    fake: FakeAnthropic, files: list[str], tmp_path: Path
) -> None:
    assert INVENTED not in ANSWER
    offline, claude, done = _compared(fake, files, tmp_path, inventing)
    assert "DNS" not in done.stdout and "DNS" not in done.stderr
    assert _spans(claude) == _spans(offline)
    assert not any("DNS" in c["text"] for c in claude["claims"])
    human = run_verity("check-answer", *files, "--provider", "anthropic",
                       env=_env(tmp_path, fake))
    assert human.returncode == 0, human.stderr
    assert "DNS" not in human.stdout
    assert "claims read by the extractor: 7 kept, 1 of its reply dropped" in " ".join(
        human.stdout.split())


def test_extractor__an_unusable_reply_falls_back_to_the_splitter_and_says_so(
    fake: FakeAnthropic, files: list[str], tmp_path: Path
) -> None:
    offline, claude, done = _compared(fake, files, tmp_path, chatty)
    assert _spans(claude) == _spans(offline)
    assert done.stderr.startswith("verity: warning: " + FALLBACK)
    assert "the extractor's reply is not a list of claims" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert _roles(fake).count("extractor") == 2  # the technical retry, then the fallback
    human = run_verity("check-answer", *files, "--provider", "anthropic",
                       env=_env(tmp_path, fake))
    assert human.returncode == 0 and human.stderr == ""
    assert FALLBACK + "the extractor's reply is not a list of claims" in " ".join(
        human.stdout.split())


def test_extractor__a_stored_check_keeps_the_extractors_attempts_and_fallback(
    fake: FakeAnthropic, files: list[str], tmp_path: Path
) -> None:
    fake.faults("extractor", [529, 529])
    env = {**_env(tmp_path, fake), "VERITY_TRANSIENT_MAX_RETRIES": "1",
           "VERITY_TRANSIENT_RETRY_BUDGET_S": "5"}
    stored = _report(run_verity("check-answer", *files, "--json", "--store", "--provider",
                                "anthropic", env=env))
    shown = json.loads(run_verity("show", stored["run_id"], "--json", env=env).stdout)
    extractor = [a for a in shown["attempts"] if a["role"] == "extractor"]
    assert [a["outcome"] for a in extractor] == ["unavailable", "unavailable"]
    rules = shown["self_evaluation"]["rule_evaluation"]["claim_extraction"]
    assert rules["fallback"] is True and rules["reason"].startswith(
        "the extractor did not answer")
    assert _spans(stored) == _spans(_offline(files, tmp_path))


def test_extractor__check_records_the_extractor_in_the_run(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.set_default_responder(faithful, "extractor")
    settings = VeritySettings(anthropic_api_key=KEY, anthropic_base_url=fake.base_url,
                              model_extractor="claude-haiku-4-5")
    provider = AnthropicProvider.from_settings(settings)
    agents = claude_agents(settings, provider=provider)
    assert isinstance(agents.extractor, Retrying)
    assert agents.extractor.model == settings.model_for("extractor") == "claude-haiku-4-5"
    imported = parse_files(("answer.md", ANSWER), [("checkout-service.log", LOG)])
    try:
        checked = check(imported, verifier=agents.verifier, composer=agents.composer,
                        settings=settings, extractor=claude_extractor(settings, provider))
    finally:
        provider.close()
    assert checked.extraction is not None and not checked.extraction.fallback
    assert [c.start for c in checked.bundle.imported.claims] == [  # type: ignore[union-attr]
        c.start for c in split_claims(ANSWER)]
    attempts = checked.run.attempts
    assert attempts[0].role == "extractor" and attempts[0].model == "claude-haiku-4-5"
    assert attempts[0].outcome == "ok" and attempts[0].input_tokens > 0
    assert {a.run_id for a in attempts} == {checked.run.result.run_id}
    used = checked.run.result.self_evaluation.verifier_evaluation.prompt_audit.used or []
    prompt = load_prompt("extractor")
    assert ("extractor", prompt.name, prompt.version, prompt.sha256, "claude-haiku-4-5") in [
        (u.role, u.name, u.version, u.sha256, u.model) for u in used]
    rules = checked.run.result.self_evaluation.rule_evaluation["claim_extraction"]
    assert rules == {"model": "claude-haiku-4-5", "fallback": False, "reason": None,
                     "claims": 7, "dropped": 0, "omitted": 0}


def test_extractor__import_bundle_uses_the_extractor_and_offline_asks_nothing(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    fake.set_default_responder(inventing, "extractor")
    args = ("import", str(TRANSCRIPT), "--format", "anthropic", "--bundle")
    offline = _report(run_verity(*args, "--provider", "offline", env=_env(tmp_path, fake)))
    assert fake.requests == []  # a key in the environment sends nothing offline
    claude = _report(run_verity(*args, "--provider", "anthropic", env=_env(tmp_path, fake)))
    assert _roles(fake) == ["extractor"]
    assert claude["imported"]["claims"] == offline["imported"]["claims"]
    assert "DNS" not in json.dumps(claude)
