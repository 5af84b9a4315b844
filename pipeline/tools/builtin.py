"""The built-in incident tools, in the order agents see them."""

from __future__ import annotations

from typing import Any

from pipeline.tools import changes, logs, metrics, runbooks
from pipeline.tools.registry import Tool

SEARCH_LOGS = "search_logs"
QUERY_METRICS = "query_metrics"
LIST_ALERTS = "list_alerts"
LIST_DEPLOYMENTS = "list_deployments"
GET_EVENTS = "get_events"
SEARCH_RUNBOOKS = "search_runbooks"

BUILTIN_TOOLS: tuple[Tool[Any], ...] = (
    Tool(SEARCH_LOGS, logs.DESCRIPTION, logs.SearchLogsArgs, logs.search_logs),
    Tool(QUERY_METRICS, metrics.DESCRIPTION, metrics.QueryMetricsArgs, metrics.query_metrics),
    Tool(LIST_ALERTS, changes.ALERTS_DESCRIPTION, changes.ListAlertsArgs, changes.list_alerts),
    Tool(LIST_DEPLOYMENTS, changes.DEPLOYMENTS_DESCRIPTION, changes.ListDeploymentsArgs,
         changes.list_deployments),
    Tool(GET_EVENTS, changes.EVENTS_DESCRIPTION, changes.GetEventsArgs, changes.get_events),
    Tool(SEARCH_RUNBOOKS, runbooks.DESCRIPTION, runbooks.SearchRunbooksArgs,
         runbooks.search_runbooks),
)
