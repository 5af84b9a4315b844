"""Whole runs on the Claude agents over real HTTP: the fake server answers as Claude would
(`claude_like`), and the run ends with the same stored shape as an offline run, with tokens and
cost on every model attempt the runtime stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from models.common import FallbackType, RunStatus
from models.fallback import FallbackReason
from pipeline.agents.claude import ClaudeVerifier
from pipeline.agents.claude_executor import SUBMIT_EVIDENCE
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime, resolve_scenario
from pipeline.providers.messages import JSON
from pipeline.run.attempts import Retrying
from pipeline.run.runtime import Runtime
from pipeline.scenarios import load_scenario
from tests.providers import claude_like
from tests.providers.claude_like import answer_like_claude

TENANT = "team-a"
"""The owner of this module's runs."""

SCENARIOS = ["checkout-pool-exhaustion", "knowledge-payment-db-credentials"]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as running:
        answer_like_claude(running)
        yield running


def drive(runtime: Runtime, scenario: str, *, tenant_id: str = TENANT) -> str:
    """Run one scenario to its end in this thread, node by node (what the workers do)."""
    path = resolve_scenario(scenario, None)
    run_id = runtime.submit(load_scenario(Path(path)).meta.question, source=path,
                            tenant_id=tenant_id)
    outcome = runtime.coordinate(run_id, 0)
    for _ in range(50):
        if outcome.kind != "committed" or outcome.next is None:
            break
        for tool_call_id in outcome.next.tool_call_ids:
            runtime.run_tool_call(run_id, tool_call_id)
        outcome = runtime.run_node(run_id, outcome.next.node, outcome.version)
    return run_id


def _calls(runtime: Runtime, run_id: str) -> list[tuple[str, str]]:
    return sorted((i.tool_name, json.dumps(i.arguments, sort_keys=True))
                  for i in runtime.store.list_invocations(run_id))


def settings(tmp_path: Path, name: str, **kw: object) -> VeritySettings:
    return VeritySettings(database_url=f"sqlite:///{tmp_path / name}.db", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_runs__claude_over_http_ends_like_an_offline_run(
    fake: FakeAnthropic, tmp_path: Path, scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    claude_settings = settings(tmp_path, "claude", provider="anthropic",
                               anthropic_api_key="sk-test", anthropic_base_url=fake.base_url)
    claude = build_runtime(claude_settings)
    offline = build_runtime(settings(tmp_path, "offline"))
    assert isinstance(claude.agents.verifier, Retrying)
    assert isinstance(claude.agents.verifier.inner, ClaudeVerifier) and claude.agents.remote
    assert not isinstance(offline.agents.verifier, Retrying) and not offline.agents.remote
    claude_run = claude.store.get_run(drive(claude, scenario), tenant_id=TENANT)
    offline_run = offline.store.get_run(drive(offline, scenario), tenant_id=TENANT)
    assert claude_run.status is offline_run.status
    assert claude_run.status in (RunStatus.SUCCESS, RunStatus.FALLBACK)
    assert (claude_run.verdict, claude_run.fallback_type) == (
        offline_run.verdict, offline_run.fallback_type)
    assert claude_run.final_answer is not None and offline_run.final_answer is not None
    assert claude_run.final_answer == offline_run.final_answer
    expected_roles = ({"planner", "knowledge"} if "knowledge" in scenario
                      else {"planner", "executor", "verifier", "composer"})
    assert {r["role"] for r in fake.requests} == expected_roles
    if "executor" in expected_roles:
        assert len(fake.requests_for("executor")) >= 2  # tool turns, then the evidence
    assert _calls(claude, claude_run.run_id) == _calls(offline, offline_run.run_id)
    assert all(r["headers"]["x-verity-role"] == r["role"] for r in fake.requests)
    attempts = claude.store.list_attempts(claude_run.run_id)
    assert {a.role for a in attempts} == expected_roles  # every model call is a row
    assert len(attempts) == len(fake.requests)
    for attempt in attempts:
        assert attempt.outcome == "ok" and attempt.input_tokens > 0 and attempt.cost_usd > 0
    executor_numbers = [a.attempt_number for a in attempts if a.role == "executor"]
    assert sorted(executor_numbers) == list(range(1, len(executor_numbers) + 1))
    claude.store.close()
    offline.store.close()


def test_runs__missing_key_with_the_anthropic_provider_is_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch
                                                                   ) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    from pipeline.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as raised:
        build_runtime(settings(tmp_path, "nokey", provider="anthropic"))
    assert "\n" not in str(raised.value) and "ANTHROPIC_API_KEY is not set" in str(raised.value)


def test_runs__auto_provider_follows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert VeritySettings().resolved_provider() == "offline"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert VeritySettings().resolved_provider() == "anthropic"
    assert VeritySettings(provider="offline").resolved_provider() == "offline"



class BreakingExecutor:
    """Answers as Claude would, except that its submitted evidence first fails validation
    (`broken`); the structural repair (a request offering only submit_evidence) then gets the
    valid document, or `repair` when given."""

    def __init__(self, broken: Any, repair: Any | None = None) -> None:
        self.broken, self.repair, self.valid = broken, repair, None
        self.repair_requests: list[JSON] = []

    def __call__(self, request: JSON) -> JSON:
        if [t["name"] for t in request.get("tools", [])] == [SUBMIT_EVIDENCE]:
            self.repair_requests.append(request)
            document = self.valid if self.repair is None else self.repair
            return {"tool_use": {"name": SUBMIT_EVIDENCE, "input": document}}
        answer = claude_like.executor(request)
        use = answer["tool_use"]
        if isinstance(use, dict) and use.get("name") == SUBMIT_EVIDENCE:
            self.valid = use["input"]
            return {"tool_use": {"name": SUBMIT_EVIDENCE, "input": self.broken(use["input"])}}
        return answer


def _duplicate_first_claim(document: dict[str, Any]) -> dict[str, Any]:
    claims = document["claims"]
    return {**document, "claims": [*claims, dict(claims[0])]}


def _claude_runtime(fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                    ) -> Runtime:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return build_runtime(settings(tmp_path, "claude", provider="anthropic",
                                  anthropic_api_key="sk-test", anthropic_base_url=fake.base_url))


def _repair_events(runtime: Runtime, run_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in runtime.store.events_since(run_id, tenant_id=TENANT)
            if e.kind == "structural_repair"]


@pytest.mark.parametrize("broken", [_duplicate_first_claim, lambda _doc: {"claims": "none"}],
                         ids=["schema-fails", "not-a-contract"])
def test_structural_repair__invalid_evidence_is_repaired_once_without_tools(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: Any
) -> None:
    executor = BreakingExecutor(broken)
    fake.set_default_responder(executor, "executor")
    runtime = _claude_runtime(fake, tmp_path, monkeypatch)
    run = runtime.store.get_run(drive(runtime, "checkout-pool-exhaustion"), tenant_id=TENANT)
    assert run.status is RunStatus.SUCCESS, runtime.store.events_since(run.run_id, tenant_id=TENANT)
    assert len(executor.repair_requests) == 1
    (request,) = executor.repair_requests
    assert [t["name"] for t in request["tools"]] == [SUBMIT_EVIDENCE]  # no tool can run
    said, feedback = request["messages"][-2:]
    assert said["role"] == "assistant" and feedback["role"] == "user"
    assert "failed validation" in feedback["content"][0]["text"]
    (event,) = _repair_events(runtime, run.run_id)
    assert event["problems"] >= 1 and event["problems_left"] == 0
    attempts = [a for a in runtime.store.list_attempts(run.run_id) if a.role == "executor"]
    assert len(attempts) == len(fake.requests_for("executor"))  # the repair is a row too
    runtime.store.close()


def test_structural_repair__a_failed_repair_is_the_fixed_fallback(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = BreakingExecutor(_duplicate_first_claim, repair={"claims": [], "oops": 1})
    fake.set_default_responder(executor, "executor")
    runtime = _claude_runtime(fake, tmp_path, monkeypatch)
    run = runtime.store.get_run(drive(runtime, "checkout-pool-exhaustion"), tenant_id=TENANT)
    assert run.status is RunStatus.FALLBACK
    assert run.fallback_type is FallbackType.EVIDENCE_VALIDATION_FAILED
    (fallback,) = [e.payload for e in runtime.store.events_since(run.run_id, tenant_id=TENANT)
                   if e.node == "fallback"]
    assert fallback["reason"] == FallbackReason.STRUCTURAL_REPAIR_FAILED.value
    assert len(executor.repair_requests) == 1  # one repair, never two
    (event,) = _repair_events(runtime, run.run_id)
    assert event["problems_left"] >= 1
    assert not {"verifier", "composer"} & {r["role"] for r in fake.requests}
    runtime.store.close()


def test_structural_repair__the_offline_executor_needs_none(tmp_path: Path) -> None:
    runtime = build_runtime(settings(tmp_path, "offline"))
    run_id = drive(runtime, "checkout-pool-exhaustion")
    assert runtime.store.get_run(run_id, tenant_id=TENANT).status is RunStatus.SUCCESS
    assert _repair_events(runtime, run_id) == []
    runtime.store.close()
