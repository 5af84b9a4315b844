"""What the graph's node bodies ask of the agents: one protocol per role, and the set a run uses.

The single-turn roles (Verifier, Composer, claim extractor) are `Model`s (`pipeline.model`, the
one door to a model; a Claude one comes wrapped in its retry policy); the Planner, the Executor
and the knowledge answerer are agents with their own shapes below, whose Claude implementations
call the same door. Intent routing and knowledge validation are deterministic functions, carried
with the agents so a runtime factory can swap them with the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from models.agent import ExecutorStep, KnowledgeAnswer, Plan, PreviousTurn, Transcript
from models.common import Intent
from models.invocation import ToolInvocation
from models.verifier import EvidenceGap
from pipeline.model import Model
from pipeline.run.attempts import AttemptLog
from pipeline.tools.registry import ToolRegistry


class Planner(Protocol):
    """Turns a question (or the Verifier's gaps) into a plan."""

    def plan(
        self,
        query: str,
        *,
        registry: ToolRegistry,
        previous_turn: PreviousTurn | None = None,
        gaps: list[EvidenceGap] | None = None,
        log: AttemptLog | None = None,
    ) -> Plan:
        """The investigation plan; model calls are recorded in `log`."""
        ...


class Executor(Protocol):
    """The Executor loop, one step at a time, and the spec's one no-tool structural repair of
    its final output."""

    def step(
        self, transcript: Transcript, *, registry: ToolRegistry, log: AttemptLog | None = None
    ) -> ExecutorStep:
        """The next step: more tool calls, or the final structured output; model calls are
        recorded in `log`."""
        ...

    def repair(
        self, transcript: Transcript, raw: str, problems: list[str], *,
        log: AttemptLog | None = None,
    ) -> str | None:
        """A corrected raw output for `raw`, told what was wrong (`problems`), without tools;
        None when this output is not one to repair (nothing is asked: it goes straight to the
        fallback). An Executor without a model never repairs."""
        ...


class KnowledgeAnswerer(Protocol):
    """Answers a knowledge question from the single lookup's result."""

    def answer(
        self, query: str, lookup: ToolInvocation, *, log: AttemptLog | None = None
    ) -> KnowledgeAnswer:
        """Answer items citing returned documents; model calls are recorded in `log`."""
        ...


@dataclass
class Agents:
    """The agents a run uses."""

    planner: Planner
    executor: Executor
    verifier: Model
    composer: Model
    knowledge: KnowledgeAnswerer
    classify_intent: Callable[[str], Intent]
    validate_knowledge: Callable[[KnowledgeAnswer, ToolInvocation], list[str]]
    extractor: Model | None = None
    """The claim extractor of a checked answer (`pipeline.checks`); None: the deterministic
    splitter reads its claims. No graph node asks it."""
    remote: bool = False
    """Some agent sends network requests: the runtime journals their attempts as they happen
    and abandons the in-flight rows of a copy that died (said by whoever builds the set)."""
