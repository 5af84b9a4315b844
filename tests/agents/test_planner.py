"""The offline Planner: intent, service, symptoms → tools, knowledge lookups, gap-only plans."""

from __future__ import annotations

from typing import Any

import pytest

from models.agent import PreviousTurn
from models.common import Intent
from models.verifier import EvidenceGap
from pipeline.agents.planner import OfflinePlanner, classify_intent, find_service, services_named
from pipeline.tools import ToolRegistry, default_registry

KNOWN = ["checkout-service", "payment-db", "payment-gateway", "orders-api"]


def _plan(query: str, **kwargs: Any) -> Any:
    kwargs.setdefault("known_services", KNOWN)
    return OfflinePlanner().plan(query, registry=default_registry(), **kwargs)


def _calls(plan: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(s.tool_name, s.arguments) for s in plan.steps]


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("How do I rotate the payment-db credentials?", Intent.KNOWLEDGE_QUERY),
        ("how to fail over payment-db", Intent.KNOWLEDGE_QUERY),
        ("What is the procedure for rolling back a deploy?", Intent.KNOWLEDGE_QUERY),
        ("Is there a runbook for OOMKilled pods?", Intent.KNOWLEDGE_QUERY),
        ("Show me the steps to renew a TLS certificate", Intent.KNOWLEDGE_QUERY),
        ("Why is checkout-service returning 500s?", Intent.DIAGNOSIS),
        ("Why does inventory-service keep restarting?", Intent.DIAGNOSIS),
        ("Is billing-service throwing errors this morning?", Intent.DIAGNOSIS),
        ("orders-api is slow", Intent.DIAGNOSIS),
        ("What's wrong with payment-gateway?", Intent.DIAGNOSIS),
        ("Why is there no runbook for this outage?", Intent.DIAGNOSIS),
    ],
)
def test_planner__classify_intent(query: str, intent: Intent) -> None:
    assert classify_intent(query) is intent


@pytest.mark.parametrize(
    ("text", "known", "service"),
    [
        ("why is payment-gateway slow", KNOWN, "payment-gateway"),
        ("payment-gateway-v2 is slow", KNOWN, None),  # not the known payment-gateway
        ("is Checkout-Service down?", KNOWN, "checkout-service"),
        ("why is basket-service failing", KNOWN, "basket-service"),  # service-like word
        ("why are the slow-ish pages slow", KNOWN, None),
        ("why is ledger-api failing", [], "ledger-api"),
        # the subject of a question about one thing, whatever its name looks like (issue 23)
        ("Why is checkout returning 500s?", [], "checkout"),
        ("Why is node-exporter down?", [], "node-exporter"),
        ("Is anything wrong with checkout?", [], "checkout"),
        ("Is checkout down?", [], "checkout"),
        ("Why is the site down?", [], None),
        ("why is it slow", [], None),
        ("Why are we returning errors?", [], None),
    ],
)
def test_planner__find_service(text: str, known: list[str], service: str | None) -> None:
    assert find_service(text, known) == service


def test_planner__errors_plan_error_logs_and_error_rate() -> None:
    plan = _plan("Why is checkout-service returning 500s?")
    assert plan.intent is Intent.DIAGNOSIS and plan.service == "checkout-service"
    assert _calls(plan) == [
        ("search_logs", {"service": "checkout-service", "level": "ERROR"}),
        ("query_metrics", {"service": "checkout-service", "metric": "error"}),
        ("list_deployments", {"service": "checkout-service", "lookback_minutes": 240}),
        ("list_alerts", {"service": "checkout-service"}),
    ]
    assert all(s.reason for s in plan.steps)


def test_planner__latency_plans_the_latency_metric_and_warn_logs() -> None:
    calls = _calls(_plan("Why is orders-api so slow?"))
    assert ("query_metrics", {"service": "orders-api", "metric": "latency"}) in calls
    assert ("search_logs", {"service": "orders-api", "level": "WARN"}) in calls
    assert ("list_deployments", {"service": "orders-api", "lookback_minutes": 240}) in calls


def test_planner__crashes_plan_warning_events_and_memory() -> None:
    calls = _calls(_plan("Why does inventory-service keep restarting?"))
    assert ("get_events", {"service": "inventory-service", "type": "Warning"}) in calls
    assert ("query_metrics", {"service": "inventory-service", "metric": "memory"}) in calls
    assert ("list_alerts", {"service": "inventory-service"}) in calls


def test_planner__no_symptom_plans_every_metric() -> None:
    calls = _calls(_plan("What's going on with payment-db?"))
    assert ("query_metrics", {"service": "payment-db"}) in calls
    assert not any(tool == "get_events" for tool, _ in calls)


def test_planner__no_service_plans_across_all_services() -> None:
    plan = _plan("Why are we returning errors?", known_services=[])
    assert plan.service is None
    assert all("service" not in args for _, args in _calls(plan))


def test_planner__the_service_can_come_from_the_previous_turn() -> None:
    previous = PreviousTurn(run_id="r1", query="Why is checkout-service returning 500s?",
                            answer_summary="Root cause: deploy v2.3.1 ...")
    plan = _plan("and is it still failing?", previous_turn=previous)
    assert plan.service == "checkout-service"
    assert ("search_logs", {"service": "checkout-service", "level": "ERROR"}) in _calls(plan)


def test_planner__knowledge_is_exactly_one_runbook_search() -> None:
    plan = _plan("How do I rotate the payment-db credentials?")
    assert plan.intent is Intent.KNOWLEDGE_QUERY
    assert _calls(plan) == [("search_runbooks",
                             {"query": "How do I rotate the payment-db credentials?"})]


def test_planner__tools_missing_from_the_registry_are_not_planned() -> None:
    registry = ToolRegistry()
    builtin = default_registry()
    registry.register(builtin.get("search_logs"))
    plan = OfflinePlanner().plan("Why is checkout-service returning 500s?", registry=registry,
                                 known_services=KNOWN)
    assert [s.tool_name for s in plan.steps] == ["search_logs"]


def test_planner__gap_mode_plans_only_from_the_gaps() -> None:
    gaps = [
        EvidenceGap(claim_id="c3", description="Claim c3 needs evidence for its quantity.",
                    critical=True, suggested_tool="query_metrics"),
        EvidenceGap(claim_id="c4", description="Claim c4 needs evidence for its version.",
                    critical=True, suggested_tool="list_deployments"),
        EvidenceGap(claim_id="c5", description="Claim c5 needs evidence for its quantity.",
                    critical=True, suggested_tool="query_metrics"),
        EvidenceGap(claim_id=None, description="Something else.", critical=False,
                    suggested_tool="no_such_tool"),
    ]
    plan = _plan("Why is checkout-service returning 500s?", gaps=gaps)
    assert plan.evidence_gap_only is True and plan.intent is Intent.DIAGNOSIS
    assert _calls(plan) == [
        ("query_metrics", {"service": "checkout-service"}),
        ("list_deployments", {"service": "checkout-service", "lookback_minutes": 240}),
        ("search_logs", {"service": "checkout-service", "level": "WARN"}),
    ]
    assert "claim c3" in plan.steps[0].reason and "claim c4" in plan.steps[1].reason
    assert "the diagnosis" in plan.steps[2].reason


def test_planner__gap_mode_with_a_runbook_gap_searches_its_description() -> None:
    gap = EvidenceGap(claim_id="c1", description="which runbook covers pool exhaustion",
                      critical=False, suggested_tool="search_runbooks")
    plan = _plan("Why is checkout-service returning 500s?", gaps=[gap])
    assert _calls(plan) == [("search_runbooks",
                             {"query": "which runbook covers pool exhaustion"})]


@pytest.mark.parametrize(
    ("description", "tool", "call"),
    [
        pytest.param("Claim c3 ties its cause to its effect by time alone: none of its evidence "
                     "shows payment-gateway, which it names, behaving differently.",
                     "query_metrics", ("query_metrics", {"service": "payment-gateway"}),
                     id="metrics-of-the-dependency-it-names"),
        pytest.param("Claim c3 needs the Warning events of pricing-api, a service-like word.",
                     "get_events", ("get_events", {"service": "pricing-api", "type": "Warning"}),
                     id="an-unknown-service-like-word"),
        pytest.param("Claim c3: the Kubernetes events of checkout-service would show it.",
                     "get_events",
                     ("get_events", {"service": "checkout-service", "type": "Warning"}),
                     id="only-the-question's-service"),
        pytest.param("Claim g1-c3 needs evidence for its quantity.", "query_metrics",
                     ("query_metrics", {"service": "checkout-service"}),
                     id="a-claim-id-is-not-a-service"),
    ],
)
def test_planner__gap_mode_scopes_each_call_to_the_service_its_gap_names(
    description: str, tool: str, call: tuple[str, dict[str, Any]]
) -> None:
    gap = EvidenceGap(claim_id="c3", description=description, critical=True,
                      suggested_tool=tool)
    plan = _plan("Why is checkout-service returning 500s?", gaps=[gap])
    assert plan.evidence_gap_only and _calls(plan) == [call]
    assert "claim c3" in plan.steps[0].reason


def test_planner__gap_mode_plans_one_call_per_tool_and_service() -> None:
    def gap(description: str) -> EvidenceGap:
        return EvidenceGap(claim_id="c3", description=description, critical=True,
                           suggested_tool="query_metrics")

    plan = _plan("Why is checkout-service returning 500s?",
                 gaps=[gap("metrics of payment-db"), gap("metrics of payment-db again"),
                       gap("metrics of orders-api"), gap("its quantity")])
    assert _calls(plan) == [
        ("query_metrics", {"service": "payment-db"}),
        ("query_metrics", {"service": "orders-api"}),
        ("query_metrics", {"service": "checkout-service"}),
    ]


def test_planner__gap_mode_without_known_services_still_finds_the_gap_service() -> None:
    gap = EvidenceGap(claim_id="c3", description="none of its evidence shows pricing-api",
                      critical=True, suggested_tool="query_metrics")
    plan = OfflinePlanner().plan("Why is catalog-service returning 503s?",
                                 registry=default_registry(), gaps=[gap])
    assert plan.service == "catalog-service"
    assert _calls(plan) == [("query_metrics", {"service": "pricing-api"})]


@pytest.mark.parametrize(
    ("text", "known", "named"),
    [
        ("checkout-service calls payment-db and payment-gateway", KNOWN,
         ["checkout-service", "payment-db", "payment-gateway"]),
        ("payment-gateway-v2 is not payment-gateway", KNOWN, ["payment-gateway"]),
        ("ledger-api.internal and claim g1-c3", [], ["ledger-api"]),
        ("Claim c3 needs evidence for its quantity.", KNOWN, []),
    ],
)
def test_planner__services_named(text: str, known: list[str], named: list[str]) -> None:
    assert services_named(text, known) == named
