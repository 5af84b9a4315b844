"""The offline knowledge answerer and `validate_knowledge_answer`."""

from __future__ import annotations

import pytest

from models.agent import AnswerItem, KnowledgeAnswer, ToolCallRequest
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from pipeline.agents.knowledge import OfflineKnowledgeAnswerer, validate_knowledge_answer
from pipeline.scenarios import load_scenario, scenario_path
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry, run_tool

LOOKUP_ID = "toolu_01LOOKUP000000000000000"
QUESTION = "How do I rotate the payment-db credentials?"


def _lookup(query: str = QUESTION, *, tool: str = "search_runbooks") -> ToolInvocation:
    scenario = load_scenario(scenario_path("knowledge-payment-db-credentials"))
    arguments = {"query": query} if tool == "search_runbooks" else {}
    return run_tool(default_registry(), ToolCallRequest(tool_call_id=LOOKUP_ID, tool_name=tool,
                                                        arguments=arguments),
                    source=ScenarioSource(scenario), max_items=50, max_bytes=16384)


def test_knowledge__answer_is_the_best_runbook_step_by_step() -> None:
    answer = OfflineKnowledgeAnswerer().answer(QUESTION, _lookup())
    assert answer.lookup_tool_call_id == LOOKUP_ID
    assert answer.items[0].text.startswith('Runbook "Rotate the payment-db credentials"')
    steps = [i.text for i in answer.items if i.text.startswith("Step ")]
    assert len(steps) == 7 and steps[1].startswith("Step 2: Create the new credential")
    assert {d for i in answer.items[:8] for d in i.document_ids} == {
        "rb-payment-db-credential-rotation"}
    assert validate_knowledge_answer(answer, _lookup()) == []


def test_knowledge__close_runners_up_are_pointed_to() -> None:
    answer = OfflineKnowledgeAnswerer().answer("payment-db", _lookup("payment-db"))
    see_also = [i for i in answer.items if i.text.startswith("See also")]
    assert see_also and all(len(i.document_ids) == 1 for i in see_also)
    assert validate_knowledge_answer(answer, _lookup("payment-db")) == []


def test_knowledge__no_documents_means_no_items_and_a_failed_validation() -> None:
    lookup = _lookup("zebra quokka")
    assert lookup.evidence_status is EvidenceStatus.NO_EVIDENCE
    answer = OfflineKnowledgeAnswerer().answer("zebra quokka", lookup)
    assert answer.items == []
    errors = validate_knowledge_answer(answer, lookup)
    assert "the answer has no items" in errors
    assert any("returned no documents" in e for e in errors)


def _answer(*doc_ids: str, lookup_id: str = LOOKUP_ID) -> KnowledgeAnswer:
    return KnowledgeAnswer(lookup_tool_call_id=lookup_id, items=[
        AnswerItem(text=f"see {d}", document_ids=[d]) for d in doc_ids])


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(_answer("rb-made-up"), "item 0 cites documents the lookup did not return: "
                     "rb-made-up", id="unknown-document"),
        pytest.param(_answer("rb-payment-db-credential-rotation", "rb-kafka-consumer-lag"),
                     "item 1 cites documents the lookup did not return: rb-kafka-consumer-lag",
                     id="existing-but-not-returned"),
        pytest.param(_answer("rb-payment-db-credential-rotation", lookup_id="toolu_01other"),
                     "the answer cites lookup 'toolu_01other'", id="wrong-lookup"),
        pytest.param(_answer(), "the answer has no items", id="empty"),
    ],
)
def test_knowledge__validation_rejects(answer: KnowledgeAnswer, error: str) -> None:
    errors = validate_knowledge_answer(answer, _lookup())
    assert any(error in e for e in errors), errors


def test_knowledge__validation_rejects_a_lookup_that_is_not_a_runbook_search() -> None:
    lookup = _lookup(tool="list_alerts")
    errors = validate_knowledge_answer(_answer("rb-payment-db-credential-rotation"), lookup)
    assert any("not 'search_runbooks'" in e for e in errors)


def test_knowledge__a_failed_lookup_yields_no_items() -> None:
    failed = _lookup().model_copy(update={
        "status": LifecycleStatus.ERROR, "evidence_status": EvidenceStatus.ERROR,
        "projection": None, "error": "RuntimeError: boom"})
    answer = OfflineKnowledgeAnswerer().answer(QUESTION, failed)
    assert answer.items == []
    assert validate_knowledge_answer(_answer("rb-payment-db-credential-rotation"), failed)
