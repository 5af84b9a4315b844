"""The graph is declared once, and every driver steps through the same table: the Celery runtime
(a real worker on the embedded transport), the in-process runner and `verity verify` visit the
same nodes and emit the same event kinds with the same payload keys for the same input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from models.common import RunStatus
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime, offline_agents, resolve_scenario
from pipeline.inprocess import MemoryRun, drive, run_in_process
from pipeline.run.graph import GRAPH, QUEUES, GraphError
from pipeline.run.runtime import Runtime
from pipeline.scenarios import load_scenario
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry
from pipeline.verification import load_bundle, verify_bundle

TENANT = "team-a"
"""The owner of this module's runs."""

SCENARIOS = ["checkout-pool-exhaustion", "billing-no-evidence", "inventory-oom-crashloop"]
Shape = list[tuple[str, str, tuple[str, ...]]]


def _shape(events: list[Any]) -> Shape:
    """(node, kind, payload keys) of each event, leaving out what only a store writes."""
    shaped = []
    for event in events:
        node, kind, payload = (event.node, event.kind, event.payload) \
            if hasattr(event, "node") else event
        if node in ("submit", "finalize"):
            continue
        shaped.append((node, kind, tuple(sorted(payload))))
    return shaped


def test_graph__every_successor_is_declared_and_every_node_reachable() -> None:
    names = set(GRAPH.nodes)
    reached, frontier = {GRAPH.entry}, [GRAPH.entry]
    while frontier:
        spec = GRAPH.spec(frontier.pop())
        assert spec.successors <= names, spec.node
        for following in spec.successors - reached:
            reached.add(following)
            frontier.append(following)
    assert reached == names
    terminal = GRAPH.spec(GRAPH.terminal)
    assert terminal.body is None and not terminal.successors
    assert all(s.body is not None for s in GRAPH.nodes.values() if s.node != GRAPH.terminal)


def test_graph__celery_routes_each_node_to_its_declared_queue() -> None:
    from tasks.app import app

    router = app.amqp.router
    for spec in GRAPH.nodes.values():
        assert router.route({}, f"verity.node.{spec.node}")["queue"].name == spec.queue
    assert router.route({}, "verity.node.tool")["queue"].name == "tools"
    assert set(QUEUES) == {"control", "llm", "tools"}


def test_graph__a_route_outside_the_declaration_is_refused() -> None:
    runtime_ctx = build_runtime(VeritySettings(database_url="sqlite://")).context()
    spec = GRAPH.spec("fallback")
    bad = GRAPH.with_nodes(fallback=spec.__class__(
        node=spec.node, queue=spec.queue, body=spec.body,
        edge=lambda ctx, inp, step: _to(step, "verify"), successors=spec.successors))
    state = _fallback_state()
    run = MemoryRun(run_id="r1", state=state)
    with pytest.raises(GraphError, match="fallback routed to 'verify'"):
        drive(bad, runtime_ctx, run)


def _to(step: Any, node: str) -> Any:
    from models.state import NextStep

    step.state = step.state.model_copy(update={"next": NextStep(node=node)})
    return step


def _fallback_state() -> Any:
    from models.common import FallbackType
    from models.fallback import FallbackReason
    from models.state import NextStep, PipelineState, RuntimeState

    return RuntimeState(pipeline=PipelineState(query="q"), next=NextStep(
        node="fallback", fallback_type=FallbackType.EVIDENCE_VALIDATION_FAILED,
        reason=FallbackReason.EXECUTOR_INVALID_OUTPUT))


@pytest.fixture
def celery_runtime(tmp_path: Path) -> Iterator[Runtime]:
    """A runtime on SQLite with a real Celery worker thread on the embedded transport."""
    from tasks.embedded import embedded_worker

    runtime = build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path / 'v.db'}",
                                           provider="offline"))
    with embedded_worker(runtime):
        yield runtime
    runtime.store.close()


@pytest.mark.parametrize("name", SCENARIOS)
def test_drivers__visit_the_same_nodes_with_the_same_events(
    celery_runtime: Runtime, name: str
) -> None:
    from client import VerityClient

    path = resolve_scenario(name, None)
    scenario = load_scenario(Path(path))
    client = VerityClient(celery_runtime, tenant=TENANT)
    run_id = client.submit(scenario.meta.question, data_source=path)
    record = client.wait(run_id, timeout=60)
    assert record.status in (RunStatus.SUCCESS, RunStatus.FALLBACK)
    celery_events = _shape(celery_runtime.store.events_since(run_id, tenant_id=TENANT))

    # in process: the same graph, every tool inline, the whole run
    loop = run_in_process(scenario.meta.question, source=ScenarioSource(scenario),
                          registry=default_registry())
    memory = loop.run
    drive(GRAPH, celery_runtime.context(), memory, call_tool=None)
    assert _shape(memory.events) == celery_events
    assert [i.tool_call_id for i in memory.invocations] == [
        i.tool_call_id for i in celery_runtime.store.list_invocations(run_id)]

    # verity verify on the stored run's bundle: the same events from execute's last step on
    bundle = load_bundle(celery_runtime.store.to_bundle(run_id, tenant_id=TENANT).model_dump_json())
    verified = verify_bundle(bundle, verifier=offline_agents().verifier,
                             composer=offline_agents().composer)
    tail = celery_events[max(i for i, e in enumerate(celery_events)
                             if e[:2] == ("execute", "completed")):]
    assert _shape(verified.events) == tail
    assert (verified.result.status, verified.result.verdict) == (record.status.value,
                                                                 record.verdict)
    assert verified.result.final_answer == record.final_answer


class _TwiceTheSameId:
    """An Executor whose first step asks for two calls under one tool_call_id."""

    def step(self, transcript: Any, **_: Any) -> Any:
        from models.agent import ExecutorStep, ToolCallRequest

        if transcript.turns:
            return ExecutorStep(final_output='{"claims": []}')
        same = "toolu_01SameSameSameSameSame00"
        return ExecutorStep(tool_calls=[
            ToolCallRequest(tool_call_id=same, tool_name="search_logs",
                            arguments={"service": "checkout-service"}),
            ToolCallRequest(tool_call_id=same, tool_name="get_events",
                            arguments={"service": "checkout-service"})])

    def repair(self, *_: Any, **__: Any) -> None:
        return None


def test_execute__a_duplicate_tool_call_id_is_an_error_event_and_the_first_call_stands() -> None:
    import dataclasses

    from pipeline.inprocess import investigate

    scenario = load_scenario(Path(resolve_scenario("checkout-pool-exhaustion", None)))
    agents = dataclasses.replace(offline_agents(), executor=_TwiceTheSameId())
    run = investigate(scenario.meta.question, source=ScenarioSource(scenario),
                      registry=default_registry(), agents=agents)
    assert [(i.tool_call_id, i.tool_name) for i in run.invocations] == [
        ("toolu_01SameSameSameSameSame00", "search_logs")]
    (duplicate,) = [p for n, k, p in run.events if k == "duplicate_tool_call"]
    assert duplicate["tool_name"] == "get_events"
    assert "duplicate tool_call_id 'toolu_01SameSameSameSameSame00'" in duplicate["error"]
    assert run.state.next is not None and run.state.next.node == "finalize"  # the run goes on
