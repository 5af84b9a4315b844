"""Tools over incident data: the registry, the runner and the built-in tools.

    registry = default_registry()
    invocation = run_tool(registry, request, source=scenario, max_items=50, max_bytes=16384)
"""

from __future__ import annotations

from pipeline.tools.registry import (
    Tool,
    ToolArgumentError,
    ToolError,
    ToolRegistry,
    UnknownToolError,
    default_registry,
    run_tool,
)
from pipeline.tools.source import IncidentSource, ToolOutput

__all__ = [
    "IncidentSource",
    "Tool",
    "ToolArgumentError",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "UnknownToolError",
    "default_registry",
    "run_tool",
]
