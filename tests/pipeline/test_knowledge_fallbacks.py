"""Knowledge questions that fall back: knowledge wording, and a reason that tells a model that
could not answer (KNOWLEDGE_UNAVAILABLE) from an answer that cites what the lookup did not
return (KNOWLEDGE_REFERENCE_INVALID). Offline, on the shipped knowledge scenario."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from models.agent import AnswerItem, KnowledgeAnswer
from models.bundle import RunResult
from models.common import FallbackType, Intent
from models.fallback import FallbackReason
from models.invocation import ToolInvocation
from pipeline.agents.knowledge import validate_knowledge_answer
from pipeline.errors import (
    BudgetExceededError,
    GuardRejectedError,
    ProviderRejectedError,
    ProviderUnavailableError,
    RunFailure,
)
from pipeline.factory import offline_agents, resolve_scenario
from pipeline.inprocess import MemoryRun, investigate, result
from pipeline.prompts import load_prompt
from pipeline.rules.fallback import knowledge_fallback
from pipeline.run.attempts import AttemptLog, attempt_call
from pipeline.scenarios import load_scenario
from pipeline.serialization import sha256_hex
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools.builtin import default_registry
from tests.doubles import Scripted

SCENARIO = "knowledge-payment-db-credentials"
DOC_ID = "rb-payment-db-credential-rotation"
DIAGNOSIS_WORDS = ("diagnosis", "evidence", "root cause", "verifier", "investigation")


@dataclass
class _Raises:
    """A knowledge answerer that fails as a broken answerer would, before any model call."""

    error: RunFailure

    def answer(self, query: str, lookup: ToolInvocation, **_: Any) -> KnowledgeAnswer:
        raise self.error


@dataclass
class _Cites:
    """A knowledge answerer that answers, citing the documents it is told to."""

    document_ids: list[str]

    def answer(self, query: str, lookup: ToolInvocation, **_: Any) -> KnowledgeAnswer:
        return KnowledgeAnswer(lookup_tool_call_id=lookup.tool_call_id, items=[
            AnswerItem(text="Rotate the credentials with the vault job.",
                       document_ids=self.document_ids)])


@dataclass
class _OverModel:
    """A knowledge answerer over a single-turn model, its calls retried and recorded as the
    Claude answerer's are: a reply citing an unknown document is refused by the same guard."""

    model: Scripted
    payload: bytes = b"{}"
    seen: list[AttemptLog] = field(default_factory=list)

    def answer(
        self, query: str, lookup: ToolInvocation, *, log: AttemptLog | None = None
    ) -> KnowledgeAnswer:
        assert log is not None
        self.seen.append(log)
        prompt = load_prompt("knowledge")

        def parse(text: str) -> KnowledgeAnswer:
            answer = KnowledgeAnswer.model_validate_json(text)
            errors = validate_knowledge_answer(answer, lookup)
            if errors:
                raise GuardRejectedError("; ".join(errors))
            return answer

        return attempt_call(lambda: self.model.respond(prompt, self.payload), role="knowledge",
                            prompt=prompt, digest=sha256_hex(self.payload),
                            model=self.model.model, parse=parse, log=log)


def _run(knowledge: Any) -> tuple[MemoryRun, RunResult]:
    scenario = load_scenario(Path(resolve_scenario(SCENARIO, None)))
    agents = dataclasses.replace(offline_agents(), knowledge=knowledge)
    assert agents.classify_intent(scenario.meta.question) is Intent.KNOWLEDGE_QUERY
    run = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                      registry=default_registry(), agents=agents)
    return run, result(run)


def _answer_text(outcome: RunResult) -> str:
    answer = outcome.final_answer
    return "\n".join([answer.answer_summary, answer.user_facing_answer,
                      *answer.recommended_actions])


def _assert_knowledge_fallback(outcome: RunResult, fallback_type: FallbackType,
                               reason: FallbackReason) -> None:
    evaluation = outcome.self_evaluation.verifier_evaluation
    assert (outcome.status, outcome.fallback_type, outcome.verdict) == (
        "FALLBACK", fallback_type, None)
    assert (evaluation.failure_reason, evaluation.failure_stage) == (reason, "knowledge")
    text = _answer_text(outcome).lower()
    assert "runbook" in text
    assert not [word for word in DIAGNOSIS_WORDS if word in text], text


def _reply(*document_ids: str) -> str:
    return KnowledgeAnswer(lookup_tool_call_id="ignored", items=[AnswerItem(
        text="Rotate the credentials.", document_ids=list(document_ids))]).model_dump_json()


def test_knowledge__the_offline_answer_still_succeeds() -> None:
    run, outcome = _run(offline_agents().knowledge)
    assert outcome.status == "SUCCESS" and outcome.fallback_type is None
    assert DOC_ID in outcome.final_answer.user_facing_answer


@pytest.mark.parametrize(
    ("error", "fallback_type", "reason"),
    [
        (ProviderUnavailableError("529 overloaded"), FallbackType.SEMANTIC_UNAVAILABLE,
         FallbackReason.KNOWLEDGE_UNAVAILABLE),
        (ProviderRejectedError("400 bad request"), FallbackType.SEMANTIC_UNAVAILABLE,
         FallbackReason.KNOWLEDGE_UNAVAILABLE),
        (GuardRejectedError("item 0 cites rb-nope"), FallbackType.EVIDENCE_VALIDATION_FAILED,
         FallbackReason.KNOWLEDGE_REFERENCE_INVALID),
        (BudgetExceededError("token budget of 10 spent"), FallbackType.SEMANTIC_UNAVAILABLE,
         FallbackReason.BUDGET_EXCEEDED),
    ],
    ids=["provider-down", "provider-rejects", "citation-refused", "budget-spent"],
)
def test_knowledge__an_answerer_that_raises_falls_back_in_knowledge_words(
    error: RunFailure, fallback_type: FallbackType, reason: FallbackReason
) -> None:
    run, outcome = _run(_Raises(error))
    _assert_knowledge_fallback(outcome, fallback_type, reason)
    assert str(error) not in _answer_text(outcome)  # never an internal error string
    assert [(n, k) for n, k, _ in run.events if n == "knowledge"] == [("knowledge", "failed")]


@pytest.mark.parametrize(
    ("replies", "outcomes", "fallback_type", "reason"),
    [
        ([ProviderUnavailableError("503"), ProviderUnavailableError("503")],
         ["unavailable", "unavailable"], FallbackType.SEMANTIC_UNAVAILABLE,
         FallbackReason.KNOWLEDGE_UNAVAILABLE),
        (["not json", "{\"items\": 3}"], ["invalid_output", "invalid_output"],
         FallbackType.SEMANTIC_UNAVAILABLE, FallbackReason.KNOWLEDGE_UNAVAILABLE),
        ([_reply("rb-unknown-doc"), _reply("rb-unknown-doc")],
         ["guard_rejected", "guard_rejected"], FallbackType.EVIDENCE_VALIDATION_FAILED,
         FallbackReason.KNOWLEDGE_REFERENCE_INVALID),
    ],
    ids=["provider-down-after-retries", "invalid-output-after-retries",
         "unknown-doc-after-retries"],
)
def test_knowledge__a_model_that_cannot_answer_is_told_from_one_that_cites_badly(
    replies: list[Any], outcomes: list[str], fallback_type: FallbackType,
    reason: FallbackReason,
) -> None:
    model = Scripted(model="knowledge-double-1").enqueue(*replies)
    run, outcome = _run(_OverModel(model))
    _assert_knowledge_fallback(outcome, fallback_type, reason)
    assert [a.outcome for a in run.attempts] == outcomes
    used = outcome.self_evaluation.verifier_evaluation.prompt_audit.used
    assert used is not None
    assert [(u.role, u.model) for u in used] == [("knowledge", "knowledge-double-1")]


def test_knowledge__an_answer_citing_an_unknown_document_is_reference_invalid() -> None:
    run, outcome = _run(_Cites(["rb-does-not-exist"]))
    _assert_knowledge_fallback(outcome, FallbackType.EVIDENCE_VALIDATION_FAILED,
                               FallbackReason.KNOWLEDGE_REFERENCE_INVALID)
    assert "rb-does-not-exist" not in _answer_text(outcome)
    assert any("rb-does-not-exist" in e for e in run.state.knowledge_errors)


def test_knowledge__a_good_citation_through_the_same_answerer_succeeds() -> None:
    """The control of the test above: the same answerer citing the returned runbook."""
    run, outcome = _run(_Cites([DOC_ID]))
    assert outcome.status == "SUCCESS" and run.state.knowledge_errors == []


@pytest.mark.parametrize("reason", [FallbackReason.KNOWLEDGE_REFERENCE_INVALID,
                                    FallbackReason.KNOWLEDGE_UNAVAILABLE])
def test_knowledge__the_two_reasons_read_differently(reason: FallbackReason) -> None:
    other = ({FallbackReason.KNOWLEDGE_REFERENCE_INVALID, FallbackReason.KNOWLEDGE_UNAVAILABLE}
             - {reason}).pop()
    made = knowledge_fallback(query="How?", fallback_type=FallbackType.SEMANTIC_UNAVAILABLE,
                              reason=reason)
    twin = knowledge_fallback(query="How?", fallback_type=FallbackType.SEMANTIC_UNAVAILABLE,
                              reason=other)
    assert made.reason is reason and made.verified_sources == []
    assert made.answer_summary != twin.answer_summary
    assert made.user_facing_answer.startswith("Question: How?\n\n")
