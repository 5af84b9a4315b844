"""Fault injection for drills and tests (`VERITY_FAULTS`), as wrappers around the production
graph and tool registry: nothing of it runs unless the setting names a fault.

    delay:<node>=<seconds>   sleep before the node's body
    raise:<tool>             the tool raises (an ERROR invocation)
    raise_node:<node>        the node's body raises (the run ends FAILED)
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from pipeline.config import VeritySettings
from pipeline.run.graph import Body, Graph
from pipeline.run.nodes.common import NodeContext, NodeInput, Step
from pipeline.tools.registry import ToolRegistry


class InjectedFaultError(RuntimeError):
    """Raised where a drill asked for a failure."""


def with_faults(graph: Graph, registry: ToolRegistry, settings: VeritySettings
                ) -> tuple[Graph, ToolRegistry]:
    """The graph and registry with the configured faults; the same objects when none is."""
    if not settings.faults:
        return graph, registry
    specs = {}
    for name, spec in graph.nodes.items():
        if spec.body is None:
            continue
        delay = settings.node_delay(name)
        raising = name in settings.failing_nodes()
        if delay or raising:
            specs[name] = dataclasses.replace(spec, body=_faulty(spec.body, delay, raising))
    failing = settings.failing_tools()
    if failing:
        tools = {name: registry.get(name) for name in registry.names()}
        for name in failing & set(tools):
            tools[name] = dataclasses.replace(tools[name], function=_raise_injected)
        registry = ToolRegistry(tools)
    return graph.with_nodes(**specs), registry


def _faulty(body: Body, delay: float, raising: bool) -> Body:
    def run(ctx: NodeContext, inp: NodeInput) -> Step:
        if delay:
            time.sleep(delay)
        if raising:
            raise InjectedFaultError("injected node failure")
        return body(ctx, inp)

    return run


def _raise_injected(*_args: object, **_kwargs: object) -> Any:
    raise InjectedFaultError("injected tool failure")
