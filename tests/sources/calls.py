"""The tool calls the scenario-source equivalence test makes on every shipped scenario, and
the digest of one call's invocation. Imports only what existed before sources were pushed
down, so the digests in `scenario_tool_digests.json` could be computed by the old code."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from pipeline.data.records import iso
from pipeline.scenarios import Scenario

CALL_ID = "toolu_01Equivalence0000000000"


def calls(scenario: Scenario) -> list[tuple[str, dict[str, Any]]]:
    """Every tool, over every service and across filters, windows and lookbacks."""
    now = scenario.now
    window = {"start": iso(now - timedelta(minutes=90)), "end": iso(now - timedelta(minutes=30))}
    baseline = {"start": iso(now - timedelta(hours=5)), "end": iso(now - timedelta(hours=3))}
    out: list[tuple[str, dict[str, Any]]] = []
    for service in [None, *scenario.services]:
        one = {} if service is None else {"service": service}
        out += [
            ("search_logs", one),
            ("search_logs", {**one, "level": "ERROR", "limit": 5}),
            ("search_logs", {**one, "query": "timeout", "lookback_minutes": 30}),
            ("search_logs", {**one, "level": "WARN", "window": window}),
            ("query_metrics", one),
            ("query_metrics", {**one, "metric": "error"}),
            ("query_metrics", {**one, "window": window, "baseline": baseline}),
            ("list_alerts", one),
            ("list_alerts", {**one, "state": "firing", "lookback_minutes": 600}),
            ("list_deployments", {**one, "lookback_minutes": 1440}),
            ("get_events", one),
            ("get_events", {**one, "type": "Warning", "lookback_minutes": 600}),
        ]
    out += [
        ("search_logs", {"lookback_minutes": 300}),  # past the fetch limit in some scenarios
        ("list_alerts", {"state": "resolved"}),
        ("list_deployments", {}),
        ("get_events", {"reason": "oomkilled", "namespace": "prod"}),
        ("search_runbooks", {"query": scenario.meta.question}),
        ("search_runbooks", {"query": "rollback a bad deploy", "limit": 3}),
    ]
    return out


def digest(invocation: Any) -> str:
    """sha256 of the invocation's canonical JSON (status, evidence, projection, error)."""
    text = json.dumps(invocation.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
