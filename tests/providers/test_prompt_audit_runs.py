"""Whole runs on the Claude agents over real HTTP, through the runtime and the store: the
stored prompt audit's `used` is what the stored attempt rows say (`prompts_used`), the
knowledge prompt included for a knowledge run; a knowledge model that cannot answer ends in
the KNOWLEDGE_UNAVAILABLE fallback, in knowledge wording."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic
from models.common import FallbackType, RunStatus
from models.fallback import FallbackReason
from models.run import RunRecord
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.prompts import load_prompt, prompts_used
from pipeline.run.runtime import Runtime
from tests.providers.claude_like import answer_like_claude
from tests.providers.test_fake_runs import drive

TENANT = "team-audit"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as running:
        answer_like_claude(running)
        yield running


def _runtime(tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Runtime:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings = VeritySettings(  # type: ignore[call-arg]
        database_url=f"sqlite:///{tmp_path / 'audit'}.db", provider="anthropic",
        anthropic_api_key="sk-test", anthropic_base_url=fake.base_url,
        model_knowledge="claude-haiku-test", model_verifier="claude-opus-test",
        transient_max_retries=1, transient_retry_budget_s=2.0)
    return build_runtime(settings)


def _drive(runtime: Runtime, scenario: str) -> RunRecord:
    return runtime.store.get_run(drive(runtime, scenario, tenant_id=TENANT), tenant_id=TENANT)


@pytest.mark.parametrize(
    ("scenario", "roles"),
    [
        ("checkout-pool-exhaustion", ["composer", "executor", "planner", "verifier"]),
        ("knowledge-payment-db-credentials", ["knowledge", "planner"]),
    ],
    ids=["diagnosis", "knowledge"],
)
def test_audit__a_stored_run_lists_the_prompts_and_models_its_attempts_used(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str,
    roles: list[str],
) -> None:
    runtime = _runtime(tmp_path, fake, monkeypatch)
    record = _drive(runtime, scenario)
    assert record.status is RunStatus.SUCCESS and record.self_evaluation is not None
    used = record.self_evaluation.verifier_evaluation.prompt_audit.used
    assert used == prompts_used(runtime.store.list_attempts(record.run_id))
    assert [u.role for u in used] == roles
    for use in used:
        prompt = load_prompt(use.role)
        assert (use.name, use.version, use.sha256) == (prompt.name, prompt.version,
                                                       prompt.sha256)
        assert use.model == runtime.settings.model_for(use.role)
    runtime.store.close()


def test_audit__a_knowledge_model_that_is_down_is_knowledge_unavailable(
    fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = _runtime(tmp_path, fake, monkeypatch)
    fake.fault("knowledge", 529, times=2)
    record = _drive(runtime, "knowledge-payment-db-credentials")
    assert record.status is RunStatus.FALLBACK and record.self_evaluation is not None
    assert record.fallback_type is FallbackType.SEMANTIC_UNAVAILABLE
    evaluation = record.self_evaluation.verifier_evaluation
    assert evaluation.failure_reason is FallbackReason.KNOWLEDGE_UNAVAILABLE
    assert record.final_answer is not None
    assert "runbooks" in record.final_answer.answer_summary
    assert "diagnosis" not in record.final_answer.user_facing_answer.lower()
    attempts = runtime.store.list_attempts(record.run_id)
    assert [a.outcome for a in attempts if a.role == "knowledge"] == ["unavailable"] * 2
    assert [(u.role, u.model) for u in evaluation.prompt_audit.used or []] == [
        ("knowledge", "claude-haiku-test"), ("planner", runtime.settings.model_planner)]
    runtime.store.close()
