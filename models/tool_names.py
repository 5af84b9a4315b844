"""The names of the built-in tools. Plans, invocations and bindings name a tool by these; the
pure rules (`pipeline.rules`) read them from here, below the tools that carry them
(`pipeline.tools.builtin`)."""

from __future__ import annotations

SEARCH_LOGS = "search_logs"
QUERY_METRICS = "query_metrics"
LIST_ALERTS = "list_alerts"
LIST_DEPLOYMENTS = "list_deployments"
GET_EVENTS = "get_events"
SEARCH_RUNBOOKS = "search_runbooks"
