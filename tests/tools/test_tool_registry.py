"""The registry and `run_tool`: schemas from the argument models, clean errors, never a raise."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from models.agent import ToolCallRequest
from models.invocation import EvidenceStatus, LifecycleStatus, QueryScope
from pipeline.data.source import DataSource
from pipeline.errors import VerityError
from pipeline.scenarios import Scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import (
    Tool,
    ToolArgumentError,
    ToolOutput,
    ToolRegistry,
    UnknownToolError,
    default_registry,
    run_tool,
)
from pipeline.tools.source import ArgsModel

BUILTIN = ["search_logs", "query_metrics", "list_alerts", "list_deployments", "get_events",
           "search_runbooks"]
CALL_ID = "toolu_01Registry000000000000"


class ExplodeArgs(ArgsModel):
    """Arguments of the test-only tool."""

    how: str = Field(default="boom", description="What to raise.")


def _explode(_source: DataSource, args: ExplodeArgs) -> ToolOutput:
    if args.how == "reserved":
        return ToolOutput(result={"scope": "mine"}, scope=QueryScope(), found=True)
    raise RuntimeError(f"{args.how}\n  File \"tool.py\", line 3, in explode\nsecret detail")


EXPLODE = Tool("explode", "Raises on purpose (tests only).", ExplodeArgs, _explode)


def _request(tool: str, **arguments: Any) -> ToolCallRequest:
    return ToolCallRequest(tool_call_id=CALL_ID, tool_name=tool, arguments=arguments)


def _run(registry: ToolRegistry, request: ToolCallRequest, source: Scenario) -> Any:
    return run_tool(registry, request, source=ScenarioSource(source), max_items=50,
                    max_bytes=16384)


def test_registry__default_has_the_six_builtin_tools_in_order() -> None:
    registry = default_registry()
    assert registry.names() == BUILTIN
    assert [s.name for s in registry.specs()] == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_registry__spec_schema_comes_from_the_argument_model(name: str) -> None:
    spec = next(s for s in default_registry().specs() if s.name == name)
    schema = spec.input_schema
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["properties"], "every tool takes arguments"
    assert all("description" in p for p in schema["properties"].values())
    assert len(spec.description) > 40


def test_registry__default_registry_is_fresh_each_time() -> None:
    first = default_registry()
    first.register(EXPLODE)
    assert "explode" not in default_registry()


def test_registry__duplicate_name_is_refused() -> None:
    registry = ToolRegistry()
    registry.register(EXPLODE)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(EXPLODE)


def test_registry__unknown_tool_raises_a_verity_error() -> None:
    with pytest.raises(UnknownToolError, match="unknown tool 'nope'") as info:
        default_registry().get("nope")
    assert isinstance(info.value, VerityError)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        pytest.param("search_logs", {"level": "LOUD"}, "search_logs: argument level: Input "
                     "should be 'DEBUG', 'INFO', 'WARN', 'ERROR' or 'FATAL'", id="bad-enum"),
        pytest.param("search_logs", {"limit": 0}, "search_logs: argument limit: Input should "
                     "be greater than or equal to 1", id="out-of-range"),
        pytest.param("search_logs", {"servce": "x"}, "search_logs: argument servce: Extra "
                     "inputs are not permitted", id="typo-in-name"),
        pytest.param("query_metrics", {"window": {"start": "2026-01-01T02:00:00Z",
                                                  "end": "2026-01-01T01:00:00Z"}},
                     "window end must be after its start", id="backwards-window"),
        pytest.param("list_alerts", {"window": {"start": "2026-01-01T00:00:00Z",
                                                "end": "2026-01-01T01:00:00Z"},
                                     "lookback_minutes": 30},
                     "either window or lookback_minutes", id="window-and-lookback"),
        pytest.param("search_runbooks", {}, "search_runbooks: argument query: Field required",
                     id="missing-required"),
    ],
)
def test_registry__bad_arguments_raise_a_clear_tool_argument_error(
    tool: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolArgumentError) as info:
        default_registry().get(tool).validate(arguments)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_registry__validation_normalizes_level_aliases() -> None:
    args = default_registry().get("search_logs").validate({"level": "warning"})
    assert args.level == "WARN"  # type: ignore[attr-defined]


def test_run_tool__a_raising_tool_ends_error_with_a_one_line_message(
    scenario: Any,
) -> None:
    registry = ToolRegistry()
    registry.register(EXPLODE)
    invocation = _run(registry, _request("explode"), scenario("billing-no-evidence"))
    assert invocation.status is LifecycleStatus.ERROR
    assert invocation.evidence_status is EvidenceStatus.ERROR
    assert invocation.projection is None
    assert invocation.error == "RuntimeError: boom"
    assert invocation.tool_call_id == CALL_ID and invocation.arguments == {}


def test_run_tool__a_result_using_reserved_keys_ends_error(scenario: Any) -> None:
    registry = ToolRegistry()
    registry.register(EXPLODE)
    invocation = _run(registry, _request("explode", how="reserved"),
                      scenario("billing-no-evidence"))
    assert invocation.status is LifecycleStatus.ERROR
    assert invocation.error is not None and invocation.error.startswith("ValueError: ")


def test_run_tool__an_unknown_tool_ends_error(scenario: Any) -> None:
    invocation = _run(default_registry(), _request("nope"), scenario("billing-no-evidence"))
    assert invocation.status is LifecycleStatus.ERROR
    assert invocation.error == "UnknownToolError: unknown tool 'nope'"


def test_run_tool__bad_arguments_end_error_and_keep_the_arguments_as_called(
    scenario: Any,
) -> None:
    invocation = _run(default_registry(), _request("search_logs", level="LOUD"),
                      scenario("billing-no-evidence"))
    assert invocation.status is LifecycleStatus.ERROR
    assert invocation.evidence_status is EvidenceStatus.ERROR
    assert invocation.error is not None
    assert invocation.error.startswith("ToolArgumentError: search_logs: argument level:")
    assert invocation.arguments == {"level": "LOUD"}


def test_run_tool__a_long_message_is_bounded(scenario: Any) -> None:
    registry = ToolRegistry()
    registry.register(EXPLODE)
    invocation = _run(registry, _request("explode", how="x" * 5000),
                      scenario("billing-no-evidence"))
    assert invocation.error is not None and len(invocation.error) <= 300
