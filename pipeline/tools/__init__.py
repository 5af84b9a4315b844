"""Tools over incident data: the registry, the runner and the built-in tools.

    registry = default_registry()
    source = ScenarioSource(load_scenario(scenario_path("checkout-pool-exhaustion")))
    invocation = run_tool(registry, request, source=source, max_items=50, max_bytes=16384)
"""

from __future__ import annotations

from pipeline.errors import ToolArgumentError, ToolError, UnknownToolError
from pipeline.tools.builtin import default_registry
from pipeline.tools.registry import Tool, ToolRegistry, run_tool
from pipeline.tools.source import ToolOutput

__all__ = [
    "Tool",
    "ToolArgumentError",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "UnknownToolError",
    "default_registry",
    "run_tool",
]
