"""A worker runtime whose agents raise a plain exception (a bug, not a model failure) in the
runs whose question carries `[drill raise: <role>]`: the planner, the executor, the verifier
or the composer. Every other run is the offline pipeline unchanged.

Loaded by workers through VERITY_RUNTIME_FACTORY=tests.chaos.faulty_runtime:build.
"""

from __future__ import annotations

from typing import Any

from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.run.runtime import Runtime

ROLES = ("planner", "executor", "verifier", "composer")


def marker(role: str) -> str:
    """What a question carries to make `role` raise in its run."""
    return f"[drill raise: {role}]"


class DrillBugError(RuntimeError):
    """The injected bug."""


class _Raising:
    """`agent` itself, except for the one call of its role, which raises when the run's
    question carries the marker."""

    def __init__(self, agent: Any, role: str) -> None:
        self._agent = agent
        self._role = role
        self._mark = marker(role)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)

    def _check(self, text: str) -> None:
        if self._mark in text:
            raise DrillBugError(f"drill: the {self._role} raised")


class _Planner(_Raising):
    def plan(self, query: str, **options: Any) -> Any:
        self._check(query)
        return self._agent.plan(query, **options)


class _Executor(_Raising):
    def step(self, transcript: Any, **options: Any) -> Any:
        self._check(transcript.query)
        return self._agent.step(transcript, **options)


class _SingleTurn(_Raising):
    def respond(self, prompt: Any, payload: bytes) -> Any:
        self._check(payload.decode("utf-8", "replace"))
        return self._agent.respond(prompt, payload)


def build(settings: VeritySettings) -> Runtime:
    """The offline runtime, its four agents wrapped to raise on their marker."""
    runtime = build_runtime(settings)
    agents = runtime.agents
    agents.planner = _Planner(agents.planner, "planner")
    agents.executor = _Executor(agents.executor, "executor")
    agents.verifier = _SingleTurn(agents.verifier, "verifier")
    agents.composer = _SingleTurn(agents.composer, "composer")
    return runtime
