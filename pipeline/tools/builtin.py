"""The built-in incident tools, in the order agents see them; their names are in
`models.tool_names`."""

from __future__ import annotations

from typing import Any

from models import tool_names
from pipeline.tools import changes, logs, metrics, runbooks
from pipeline.tools.registry import Tool, ToolRegistry

BUILTIN_TOOLS: tuple[Tool[Any], ...] = (
    Tool(tool_names.SEARCH_LOGS, logs.DESCRIPTION, logs.SearchLogsArgs, logs.search_logs),
    Tool(tool_names.QUERY_METRICS, metrics.DESCRIPTION, metrics.QueryMetricsArgs,
         metrics.query_metrics),
    Tool(tool_names.LIST_ALERTS, changes.ALERTS_DESCRIPTION, changes.ListAlertsArgs,
         changes.list_alerts),
    Tool(tool_names.LIST_DEPLOYMENTS, changes.DEPLOYMENTS_DESCRIPTION, changes.ListDeploymentsArgs,
         changes.list_deployments),
    Tool(tool_names.GET_EVENTS, changes.EVENTS_DESCRIPTION, changes.GetEventsArgs,
         changes.get_events),
    Tool(tool_names.SEARCH_RUNBOOKS, runbooks.DESCRIPTION, runbooks.SearchRunbooksArgs,
         runbooks.search_runbooks),
)


def default_registry() -> ToolRegistry:
    """A fresh registry holding the built-in incident tools."""
    registry = ToolRegistry()
    for tool in BUILTIN_TOOLS:
        registry.register(tool)
    return registry


__all__ = [
    "BUILTIN_TOOLS",
    "default_registry",
]
