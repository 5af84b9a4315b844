"""A run bundle as an Anthropic Messages transcript (`anthropic_transcript`): the question, one
tool_use per invocation with its own id, their results (errors marked), and the Executor's
claims as the final answer, which the Anthropic importer reads back as they were."""

from __future__ import annotations

import json
from typing import Any

import pytest

from models.bundle import RunBundle
from models.executor import (
    Claim,
    ClaimKind,
    ClaimStatus,
    EvidenceBinding,
    ExecutorEvidenceV2,
    RecommendedAction,
)
from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    Projection,
    QueryScope,
    TimeWindow,
    ToolInvocation,
)
from pipeline.errors import InputError
from pipeline.importers.anthropic import parse
from pipeline.importers.messages_export import NO_RESULT, answer_text, anthropic_transcript
from pipeline.rules.prose import split_claims

QUESTION = "Why is checkout-service returning 500s?"
LOGS_ID = "toolu_01LogsAAAAAAAAAAAAAAAAA"
DEPLOYS_ID = "toolu_01DeploysBBBBBBBBBBBBBB"
ALERTS_ID = "toolu_01AlertsCCCCCCCCCCCCCC"
LINE = "payment-db connection pool exhausted (max 20): timed out after 5000 ms"
SCOPE = QueryScope(service="checkout-service",
                   window=TimeWindow(start="2026-11-30T13:00:00Z", end="2026-11-30T15:00:00Z"),
                   filter="level >= ERROR")
LOGS = ToolInvocation(
    tool_call_id=LOGS_ID, tool_name="search_logs",
    arguments={"service": "checkout-service", "level": "ERROR"},
    status=LifecycleStatus.READY, evidence_status=EvidenceStatus.EVIDENCE_FOUND,
    projection=Projection.model_validate({
        "scope": SCOPE.model_dump(mode="json"), "truncated": True, "total_items": 512,
        "total": 512, "hits": [{"ts": "2026-11-30T14:03:12Z", "message": LINE, "note": "é"}]}))
DEPLOYS = ToolInvocation(
    tool_call_id=DEPLOYS_ID, tool_name="list_deployments", arguments={"lookback_minutes": 240},
    status=LifecycleStatus.ERROR, evidence_status=EvidenceStatus.ERROR,
    error="deployments backend unreachable")
ALERTS = ToolInvocation(
    tool_call_id=ALERTS_ID, tool_name="list_alerts", arguments={},
    status=LifecycleStatus.PROJECTING)
CLAIMS = [
    Claim(claim_id="c1", text=f"checkout-service logged 512 ERROR lines such as '{LINE}'",
          kind=ClaimKind.FINDING, critical=True, status=ClaimStatus.CONFIRMED,
          evidence_bindings=[EvidenceBinding(invocation_id=LOGS_ID, tool_name="search_logs",
                                             path="$.hits[0].message", matched_text=LINE)]),
    Claim(claim_id="c2", text="The payment-db connection pool of checkout-service is exhausted "
          "at 20 connections.", kind=ClaimKind.ROOT_CAUSE, critical=True,
          status=ClaimStatus.CONFIRMED,
          evidence_bindings=[EvidenceBinding(invocation_id=LOGS_ID, tool_name="search_logs",
                                             path="$.hits[0].message", matched_text=LINE)]),
]
OUTPUT = ExecutorEvidenceV2(
    claims=CLAIMS, missing_info=["the deploy history"],
    recommended_actions=[RecommendedAction(text="Raise the pool size", claim_ids=["c2"])])


def _bundle(output: str = OUTPUT.model_dump_json(), *,
            invocations: tuple[ToolInvocation, ...] = (LOGS, DEPLOYS, ALERTS)) -> RunBundle:
    return RunBundle(run_id="run-1", query=QUESTION, invocations=list(invocations),
                     executor_output_raw=output)


def _blocks(transcript: dict[str, Any], index: int) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = transcript["messages"][index]["content"]
    return content


def test_export__the_calls_keep_their_ids_names_and_arguments() -> None:
    transcript = anthropic_transcript(_bundle(), model="claude-sonnet-4-5")
    assert transcript["model"] == "claude-sonnet-4-5"
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant", "user",
                                                           "assistant"]
    assert _blocks(transcript, 0) == [{"type": "text", "text": QUESTION}]
    assert _blocks(transcript, 1) == [
        {"type": "tool_use", "id": i.tool_call_id, "name": i.tool_name, "input": i.arguments}
        for i in (LOGS, DEPLOYS, ALERTS)]
    assert [b["tool_use_id"] for b in _blocks(transcript, 2)] == [LOGS_ID, DEPLOYS_ID, ALERTS_ID]


def test_export__a_result_is_the_projection_without_the_reserved_keys() -> None:
    ready = _blocks(anthropic_transcript(_bundle()), 2)[0]
    assert "is_error" not in ready
    assert json.loads(ready["content"]) == {
        "total": 512, "hits": [{"ts": "2026-11-30T14:03:12Z", "message": LINE, "note": "é"}]}
    assert '"é"' in ready["content"]  # ensure_ascii=False


def test_export__an_error_invocation_is_an_error_result_with_its_text() -> None:
    _, failed, unfinished = _blocks(anthropic_transcript(_bundle()), 2)
    assert failed == {"type": "tool_result", "tool_use_id": DEPLOYS_ID,
                      "content": "deployments backend unreachable", "is_error": True}
    assert unfinished == {"type": "tool_result", "tool_use_id": ALERTS_ID,
                          "content": NO_RESULT, "is_error": True}


def test_export__the_final_text_lists_the_claims_as_written() -> None:
    transcript = anthropic_transcript(_bundle())
    assert "model" not in transcript
    (final,) = _blocks(transcript, 3)
    assert final["text"] == "\n".join(f"- {c.text}" for c in CLAIMS) == answer_text(_bundle())
    assert "Raise the pool size" not in final["text"]  # claims only


def test_export__a_line_break_inside_a_claim_keeps_it_one_bullet() -> None:
    broken = OUTPUT.model_copy(update={"claims": [
        CLAIMS[0].model_copy(update={"text": "checkout-service logged\n512 ERROR lines."})]})
    assert answer_text(_bundle(broken.model_dump_json())) == (
        "- checkout-service logged 512 ERROR lines.")


def test_export__the_importer_reads_back_the_calls_question_and_claims() -> None:
    imported = parse(json.dumps(anthropic_transcript(_bundle(), model="claude-x")))
    assert imported.question == QUESTION and imported.agent == "claude-x"
    assert [(c.call_id, c.tool, c.arguments, c.is_error) for c in imported.calls] == [
        (LOGS_ID, "search_logs", LOGS.arguments, False),
        (DEPLOYS_ID, "list_deployments", DEPLOYS.arguments, True),
        (ALERTS_ID, "list_alerts", {}, True)]
    assert [c.text for c in split_claims(imported.answer)] == [c.text for c in CLAIMS]


def test_export__a_run_without_calls_is_question_then_answer() -> None:
    transcript = anthropic_transcript(_bundle(invocations=()))
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize(("output", "message"), [
    ("not json", "has no valid Executor output"),
    ('{"claims": "none"}', "has no valid Executor output"),
    (ExecutorEvidenceV2(claims=[]).model_dump_json(), "states no claim"),
], ids=["not-json", "not-the-contract", "no-claims"])
def test_export__a_run_with_no_claims_to_state_is_one_line(output: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        anthropic_transcript(_bundle(output))
    assert str(raised.value).startswith("run run-1 ") and message in str(raised.value)
    assert "\n" not in str(raised.value)
