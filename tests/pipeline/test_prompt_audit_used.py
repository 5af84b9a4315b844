"""The prompt audit says what a run used: beside the catalog, `used` lists the prompt (role,
name, version, sha256) and the model of every role that made a model attempt, derived from
the attempts, unique and sorted; nothing for roles that did not run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from models.bundle import RunResult
from models.evaluation import PromptAudit, PromptUse, VerifierEvaluation
from models.run import LlmAttempt
from pipeline.agents.offline_verifier import MODEL_NAME as OFFLINE_VERIFIER
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import MODEL_NAME as OFFLINE_COMPOSER
from pipeline.agents.template_composer import TemplateComposer
from pipeline.errors import ProviderUnavailableError
from pipeline.factory import offline_agents, resolve_scenario
from pipeline.inprocess import investigate, result
from pipeline.model import ModelReply
from pipeline.prompts import Prompt, load_prompt, merge_prompt_uses, prompt_audit, prompts_used
from pipeline.scenarios import load_scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools.builtin import default_registry
from pipeline.verification import load_bundle, verify_bundle
from tests.doubles import Scripted

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "samples" / "bundles"


def _attempt(role: str, model: str, *, number: int = 1, version: str | None = None,
             outcome: str = "ok", cycle: int = 0) -> LlmAttempt:
    prompt = load_prompt(role)
    return LlmAttempt(run_id="r1", role=role, cycle=cycle, attempt_number=number,
                      prompt_name=prompt.name, prompt_version=version or prompt.version,
                      input_sha256="ab" * 32, model=model, latency_ms=1.0, outcome=outcome)


def _use(role: str, model: str) -> PromptUse:
    prompt = load_prompt(role)
    return PromptUse(role=role, name=prompt.name, version=prompt.version, sha256=prompt.sha256,
                     model=model)


def _used(outcome: RunResult) -> list[PromptUse] | None:
    return outcome.self_evaluation.verifier_evaluation.prompt_audit.used


def _verify(name: str, **models: object) -> RunResult:
    bundle = load_bundle((BUNDLES / name).read_text(encoding="utf-8"))
    verifier = models.get("verifier") or OfflineVerifier()
    composer = models.get("composer") or TemplateComposer()
    return verify_bundle(bundle, verifier=verifier, composer=composer).result  # type: ignore[arg-type]


# -- the pure derivation ---------------------------------------------------------------------


def test_used__one_entry_per_role_prompt_and_model_sorted_with_the_file_hash() -> None:
    attempts = [
        _attempt("verifier", "claude-opus-5-5"),
        _attempt("verifier", "claude-opus-5-5", number=2, outcome="invalid_output"),
        _attempt("executor", "claude-sonnet-5-5", number=1),
        _attempt("executor", "claude-sonnet-5-5", number=2),
        _attempt("composer", "claude-sonnet-5-5"),
        _attempt("planner", "claude-sonnet-5-5"),
        _attempt("planner", "claude-sonnet-5-5", cycle=1),  # the gap cycle: same prompt
    ]
    used = prompts_used(attempts)
    assert used == [_use("composer", "claude-sonnet-5-5"), _use("executor", "claude-sonnet-5-5"),
                    _use("planner", "claude-sonnet-5-5"), _use("verifier", "claude-opus-5-5")]
    assert prompts_used(reversed(attempts)) == used  # order-free: a grouping key
    assert prompts_used([]) == []


def test_used__two_models_for_one_role_are_two_entries() -> None:
    used = prompts_used([_attempt("verifier", "claude-opus-5-5"),
                         _attempt("verifier", "claude-sonnet-5-5", number=2)])
    assert [(u.role, u.model) for u in used] == [("verifier", "claude-opus-5-5"),
                                                 ("verifier", "claude-sonnet-5-5")]


def test_used__a_prompt_version_no_longer_in_force_has_no_hash() -> None:
    (old,) = prompts_used([_attempt("verifier", "claude-opus-5-5", version="1")])
    assert (old.version, old.sha256) == ("1", None)
    (odd,) = prompts_used([_attempt("verifier", "m").model_copy(update={"role": "../x"})])
    assert odd.sha256 is None  # a stored role is never a path to read


def test_used__merging_keeps_the_union_sorted() -> None:
    first = [_use("verifier", "m1")]
    second = [_use("composer", "m2"), _use("verifier", "m1")]
    assert merge_prompt_uses(first, second) == [_use("composer", "m2"), _use("verifier", "m1")]


def test_used__the_catalog_stays_and_used_is_optional_for_stored_rows() -> None:
    audit = prompt_audit()
    assert audit.used is None
    assert [p.role for p in audit.prompts] == ["planner", "executor", "verifier", "composer"]
    stored = {"version": audit.version, "prompts": [p.model_dump() for p in audit.prompts]}
    assert PromptAudit.model_validate_json(json.dumps(stored)).used is None  # an old row
    assert prompt_audit([]).used == []


def test_used__an_old_stored_evaluation_still_reads() -> None:
    outcome = _verify("pass.json")
    payload = outcome.self_evaluation.verifier_evaluation.model_dump(mode="json")
    del payload["prompt_audit"]["used"]
    assert VerifierEvaluation.model_validate(payload).prompt_audit.used is None


# -- what runs record ------------------------------------------------------------------------


def test_used__a_verified_bundle_lists_the_offline_verifier_and_composer() -> None:
    assert _used(_verify("pass.json")) == [_use("composer", OFFLINE_COMPOSER),
                                           _use("verifier", OFFLINE_VERIFIER)]


@pytest.mark.parametrize("name", ["gatekeeper_reject.json", "malformed_executor_output.json"])
def test_used__nothing_when_no_model_ran(name: str) -> None:
    outcome = _verify(name)
    assert outcome.status == "FALLBACK"
    assert _used(outcome) == []
    assert outcome.self_evaluation.verifier_evaluation.prompt_audit.prompts  # the catalog


def test_used__a_verifier_that_failed_is_listed_and_the_composer_that_never_ran_is_not() -> None:
    down = Scripted(model="verifier-double-1").enqueue(
        ProviderUnavailableError("529"), ProviderUnavailableError("529"))
    outcome = _verify("pass.json", verifier=down)
    assert outcome.fallback_type is not None and outcome.fallback_type.value == \
        "SEMANTIC_UNAVAILABLE"
    assert _used(outcome) == [_use("verifier", "verifier-double-1")]


def test_used__a_rejected_verdict_never_lists_the_composer() -> None:
    outcome = _verify("contradiction.json")
    assert outcome.verdict is not None and outcome.verdict.value == "REJECT"
    assert [u.role for u in _used(outcome) or []] == ["verifier"]


def test_used__an_offline_diagnosis_lists_what_made_attempts() -> None:
    """The offline Planner and Executor are code that sends no prompt and makes no attempt;
    the offline Verifier and Composer answer under their prompts like any model."""
    scenario = load_scenario(Path(resolve_scenario("checkout-pool-exhaustion", None)))
    run = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                      registry=default_registry())
    outcome = result(run)
    assert outcome.status == "SUCCESS"
    assert _used(outcome) == prompts_used(run.attempts) == [
        _use("composer", OFFLINE_COMPOSER), _use("verifier", OFFLINE_VERIFIER)]


class _RenamedAfterEachCall:
    """The offline Verifier under a new model name after every call (one per cycle here)."""

    def __init__(self) -> None:
        self.calls = 0
        self.model = "verifier-call-1"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        reply = OfflineVerifier().respond(prompt, payload)
        self.calls += 1
        self.model = f"verifier-call-{self.calls + 1}"
        return reply


def test_used__the_gap_cycle_keeps_the_first_cycles_uses() -> None:
    scenario = load_scenario(Path(resolve_scenario("catalog-pricing-rate-limit", None)))
    agents = dataclasses.replace(offline_agents(), verifier=_RenamedAfterEachCall())
    run = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                      registry=default_registry(), agents=agents)
    assert run.state.pipeline.evidence_retry_count == 1
    assert {a.cycle for a in run.attempts} == {0, 1}
    used = _used(result(run))
    assert used == prompts_used(run.attempts)
    assert [u.model for u in used or [] if u.role == "verifier"] == [
        "verifier-call-1", "verifier-call-2"]
