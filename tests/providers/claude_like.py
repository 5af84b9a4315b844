"""Fake-server responders that answer as Claude would, by asking the offline agents.

Each responder reads only what Verity sent over HTTP (the framed data in the request), rebuilds
the agent's input from it and answers with the role's tool: the Executor's transcript is rebuilt
from the tool_use / tool_result messages (ids minted by the fake server), so a run through the
fake ends with the same stored shape as an offline run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fake_anthropic import FakeAnthropic
from models.agent import ExecutorTurn, Plan, ToolCallRequest, Transcript
from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    Projection,
    ToolInvocation,
)
from models.verifier import EvidenceGap
from pipeline.agents.claude_executor import SUBMIT_EVIDENCE
from pipeline.agents.investigator import final_output, next_steps
from pipeline.agents.knowledge import OfflineKnowledgeAnswerer
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.planner import OfflinePlanner
from pipeline.agents.template_composer import TemplateComposer
from pipeline.agents.views import verifier_input_from_view
from pipeline.prompts import load_prompt
from pipeline.tools import default_registry

JSON = dict[str, Any]
_STATUS = re.compile(r"evidence status (\w+)")


def framed(text: str, tag: str) -> str | None:
    """The data between `<tag>` and `</tag>` in `text` (None when absent)."""
    if f"<{tag}>\n" not in text:
        return None
    return text.split(f"<{tag}>\n", 1)[1].rsplit(f"\n</{tag}>", 1)[0]


def _texts(message: Mapping[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


def _answer(name: str, arguments: Any) -> JSON:
    return {"tool_use": {"name": name, "input": arguments}}


def planner(request: JSON) -> JSON:
    text = _texts(request["messages"][0])
    query = (framed(text, "question") or "").replace("<\\/", "</")
    gaps_json = framed(text, "evidence_gaps")
    gaps = [EvidenceGap.model_validate(g) for g in json.loads(gaps_json)] if gaps_json else None
    plan = OfflinePlanner().plan(query, registry=default_registry(), gaps=gaps)
    return _answer("submit_plan", plan.model_dump(mode="json"))


def _single_turn(request: JSON, tag: str) -> bytes:
    return (framed(_texts(request["messages"][0]), tag) or "").encode("utf-8")


def verifier(request: JSON) -> JSON:
    view = _single_turn(request, "verifier_input").decode("utf-8")
    reply = OfflineVerifier().respond(load_prompt("verifier"), verifier_input_from_view(view))
    return _answer("submit_verification", json.loads(reply.text))


def composer(request: JSON) -> JSON:
    reply = TemplateComposer().respond(load_prompt("composer"),
                                       _single_turn(request, "composer_input"))
    return _answer("submit_answer", json.loads(reply.text))


def knowledge(request: JSON) -> JSON:
    text = _texts(request["messages"][0])
    query = (framed(text, "question") or "").replace("<\\/", "</")
    found = json.loads(framed(text, "lookup_result") or "{}")
    lookup = ToolInvocation(
        tool_call_id=found["lookup_tool_call_id"], tool_name="search_runbooks",
        status=LifecycleStatus.READY, evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        projection=Projection.model_validate(found["projection"]))
    answer = OfflineKnowledgeAnswerer().answer(query, lookup)
    return _answer("submit_knowledge_answer", answer.model_dump(mode="json"))


def _result(call: ToolCallRequest, block: Mapping[str, Any]) -> ToolInvocation:
    text = "\n".join(b.get("text", "") for b in block.get("content", []))
    if block.get("is_error"):
        return ToolInvocation(tool_call_id=call.tool_call_id, tool_name=call.tool_name,
                              arguments=call.arguments, status=LifecycleStatus.ERROR,
                              evidence_status=EvidenceStatus.ERROR, error=text)
    status = _STATUS.search(text)
    return ToolInvocation(
        tool_call_id=call.tool_call_id, tool_name=call.tool_name, arguments=call.arguments,
        status=LifecycleStatus.READY,
        evidence_status=EvidenceStatus(status.group(1)) if status else None,
        projection=Projection.model_validate(json.loads(framed(text, "tool_output") or "{}")))


def transcript_of(request: JSON) -> Transcript:
    """The Executor's transcript, rebuilt from the conversation Verity sent."""
    messages = request["messages"]
    opening = _texts(messages[0])
    gaps_json = framed(opening, "evidence_gaps")
    turns = []
    for assistant, user in zip(messages[1::2], messages[2::2], strict=False):
        calls = [ToolCallRequest(tool_call_id=b["id"], tool_name=b["name"], arguments=b["input"])
                 for b in assistant["content"] if b.get("type") == "tool_use"]
        blocks = {b["tool_use_id"]: b for b in user["content"] if b.get("type") == "tool_result"}
        turns.append(ExecutorTurn(tool_calls=calls,
                                  results=[_result(c, blocks[c.tool_call_id]) for c in calls]))
    return Transcript(
        query=(framed(opening, "question") or "").replace("<\\/", "</"),
        plan=Plan.model_validate_json(framed(opening, "plan") or "{}"),
        gaps=[EvidenceGap.model_validate(g) for g in json.loads(gaps_json)] if gaps_json else [],
        turns=turns)


def executor(request: JSON) -> JSON:
    transcript = transcript_of(request)
    steps = next_steps(transcript, registry=default_registry())
    if steps:
        return {"tool_use": [{"name": s.tool_name, "input": s.arguments} for s in steps]}
    return _answer(SUBMIT_EVIDENCE, json.loads(final_output(transcript)))


RESPONDERS = {"planner": planner, "executor": executor, "verifier": verifier,
              "composer": composer, "knowledge": knowledge}


def answer_like_claude(fake: FakeAnthropic) -> None:
    """Make every role of `fake` answer as Claude would (through the offline agents)."""
    for role, responder in RESPONDERS.items():
        fake.set_default_responder(responder, role)
