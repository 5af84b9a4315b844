"""Fixtures for the tool tests: bundled scenarios and a runner that records nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from models.agent import ToolCallRequest
from models.invocation import ToolInvocation
from pipeline.scenarios import Scenario, default_scenarios_dir, load_scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import ToolRegistry, default_registry, run_tool

Call = Callable[..., ToolInvocation]


def _scenario(name: str) -> Scenario:
    return load_scenario(default_scenarios_dir() / name)


@pytest.fixture
def scenario() -> Callable[[str], Scenario]:
    """A bundled scenario by folder name."""
    return _scenario


@pytest.fixture(scope="session")
def registry() -> ToolRegistry:
    """The built-in tools."""
    return default_registry()


@pytest.fixture
def call(registry: ToolRegistry) -> Call:
    """Run one tool on a scenario: call(scenario_name, tool, max_items=..., **arguments)."""

    def run(name: str, tool: str, *, max_items: int = 50, max_bytes: int = 16384,
            **arguments: Any) -> ToolInvocation:
        request = ToolCallRequest(tool_call_id="toolu_01TESTxxxxxxxxxxxxxxxxx", tool_name=tool,
                                  arguments=arguments)
        return run_tool(registry, request, source=ScenarioSource(_scenario(name)),
                        max_items=max_items,
                        max_bytes=max_bytes)

    return run


def _document(invocation: ToolInvocation) -> dict[str, Any]:
    assert invocation.projection is not None, invocation.error
    return invocation.projection.model_dump(mode="json")


@pytest.fixture
def doc() -> Callable[[ToolInvocation], dict[str, Any]]:
    """The stored projection as the Gatekeeper sees it."""
    return _document
