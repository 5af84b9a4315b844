"""The EVIDENCE_GAP_ONLY cycle without the runtime, for the scenario tests.

The gap cycle is planned from the gaps alone and run by the offline Executor, each call through
`run_tool`; its report supplements the first cycle's verified claims exactly as the runtime
does it (`pipeline.rules.evidence_retry`), and the union is judged over every invocation of both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from models.agent import ExecutorTurn, Plan, Transcript
from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from models.verifier import EvidenceGap
from pipeline.agents.investigator import OfflineExecutor
from pipeline.agents.planner import OfflinePlanner
from pipeline.rules.evidence_retry import carry, supplement
from pipeline.scenarios import Scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import ToolRegistry, run_tool

MAX_TURNS = 4


@dataclass(frozen=True)
class GapCycle:
    """The gap cycle's plan, transcript, invocations and report."""

    plan: Plan
    transcript: Transcript
    invocations: list[ToolInvocation]
    final_output: str


def gap_cycle(scenario: Scenario, gaps: Sequence[EvidenceGap], *,
              registry: ToolRegistry) -> GapCycle:
    """Plan from `gaps` only, then run the Executor to its report."""
    query = scenario.meta.question
    plan = OfflinePlanner().plan(query, registry=registry, gaps=list(gaps),
                                 known_services=scenario.services)
    transcript = Transcript(query=query, plan=plan, gaps=list(gaps))
    invocations: list[ToolInvocation] = []
    for _ in range(MAX_TURNS):
        step = OfflineExecutor().step(transcript, registry=registry)
        if step.final_output is not None:
            return GapCycle(plan, transcript, invocations, step.final_output)
        results = [run_tool(registry, request, source=ScenarioSource(scenario), max_items=50,
                            max_bytes=16384)
                   for request in step.tool_calls]
        invocations += results
        turn = ExecutorTurn(tool_calls=step.tool_calls, results=results)
        transcript = transcript.model_copy(update={"turns": [*transcript.turns, turn]})
    raise AssertionError(f"the gap cycle did not report in {MAX_TURNS} turns")


def union(first: Mapping[str, Any], outcome: GatekeeperOutcome, gap_output: str) -> dict[str, Any]:
    """The first cycle's verified part supplemented by the gap cycle's report."""
    return supplement(carry(first, outcome), json.loads(gap_output))
