"""Contracts between the runtime and the agents that plan and investigate.

The runtime persists these between nodes, so an Executor loop survives a worker restart: the
transcript is the whole state of the investigation.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from models.common import Contract, Intent
from models.invocation import TOOL_CALL_ID_PATTERN, ToolInvocation
from models.verifier import EvidenceGap


class ToolSpec(Contract):
    """A tool as agents see it."""

    name: str = Field(description="Registered tool name.")
    description: str = Field(description="What it does and when to use it.")
    input_schema: dict[str, Any] = Field(description="JSON Schema of its arguments.")


class ToolCallRequest(Contract):
    """One tool call an agent asks for; the id becomes the invocation's tool_call_id."""

    tool_call_id: str = Field(pattern=TOOL_CALL_ID_PATTERN, description="tool_use id.")
    tool_name: str = Field(description="Registered tool name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments.")


class PlanStep(Contract):
    """One planned tool call and why."""

    tool_name: str = Field(description="Registered tool name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments.")
    reason: str = Field(description="Why this call.")


class PreviousTurn(Contract):
    """The safe published result of the latest eligible run of the session."""

    run_id: str = Field(description="The run it came from.")
    query: str = Field(description="Its question.")
    answer_summary: str = Field(description="Its published summary.")


class Plan(Contract):
    """The Planner's investigation plan."""

    intent: Intent = Field(description="DIAGNOSIS or KNOWLEDGE_QUERY.")
    service: str | None = Field(default=None, description="Service in focus, if named.")
    steps: list[PlanStep] = Field(description="Tool calls, in order.")
    evidence_gap_only: bool = Field(default=False, description="Built from Verifier gaps only.")
    notes: str = Field(default="", description="Short planning notes (not shown to users).")


class ExecutorTurn(Contract):
    """One turn of the Executor loop: the tool calls it asked for and their results."""

    tool_calls: list[ToolCallRequest] = Field(description="Calls asked for in this turn.")
    assistant_content: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The model's own content blocks of the turn (signed thinking included), "
        "replayed unchanged in later requests; empty for offline agents.",
    )
    not_run: dict[str, str] = Field(
        default_factory=dict,
        description="tool_use ids of the content that were refused, with why (told to the "
        "model as `is_error` results when the turn is replayed).",
    )
    refused_duplicates: dict[str, str] = Field(
        default_factory=dict,
        description="A second action under a used tool_call_id: its own new id -> the id it "
        "presented.",
    )
    results: list[ToolInvocation] = Field(default_factory=list, description="Their invocations.")


class Transcript(Contract):
    """Everything the Executor has seen so far in this cycle."""

    query: str = Field(description="The user's question.")
    plan: Plan = Field(description="The plan for this cycle.")
    previous_turn: PreviousTurn | None = Field(default=None, description="Safe previous turn.")
    gaps: list[EvidenceGap] = Field(default_factory=list, description="EVIDENCE_GAP_ONLY input.")
    turns: list[ExecutorTurn] = Field(default_factory=list, description="Turns so far.")


class ExecutorStep(Contract):
    """What the Executor does next: more tool calls, or its final raw output."""

    tool_calls: list[ToolCallRequest] = Field(default_factory=list, description="Next calls.")
    final_output: str | None = Field(default=None, description="executor_evidence_v2 text.")
    assistant_content: list[dict[str, Any]] = Field(
        default_factory=list, description="The model's content blocks of this turn."
    )
    not_run: dict[str, str] = Field(
        default_factory=dict, description="Refused tool_use ids of the content, with why.")
    refused_duplicates: dict[str, str] = Field(
        default_factory=dict,
        description="A second action under a used tool_call_id: new id -> the id presented.")


class AnswerItem(Contract):
    """One statement of a knowledge answer, citing returned documents."""

    text: str = Field(min_length=1, description="The statement.")
    document_ids: list[str] = Field(min_length=1, description="Returned documents it rests on.")


class KnowledgeAnswer(Contract):
    """A KNOWLEDGE_QUERY answer bound to the single lookup call."""

    lookup_tool_call_id: str = Field(description="The lookup's tool_call_id.")
    items: list[AnswerItem] = Field(description="Bounded answer items.")
