"""Each node's queue is declared once, in the graph: every task is routed to its node's queue."""

from __future__ import annotations

import pytest

from pipeline.run.graph import BATCH_QUEUE, GRAPH, TOOL_QUEUE, WORKER_QUEUES
from tasks.app import app
from tasks.batch import start as start_batch
from tasks.nodes import NODE_TASKS, coordinate, node_task_id, tool


def _queue(name: str) -> str:
    route = app.amqp.router.route({}, name)
    return str(route["queue"].name)


@pytest.mark.parametrize("node", sorted(GRAPH.nodes))
def test_a_node_task_runs_on_its_nodes_declared_queue(node: str) -> None:
    assert _queue(NODE_TASKS[node].name) == GRAPH.spec(node).queue


def test_tools_coordinator_and_batches_run_on_their_queues() -> None:
    assert _queue(tool.name) == TOOL_QUEUE
    assert _queue(coordinate.name) == "control"
    assert _queue(start_batch.name) == BATCH_QUEUE
    every = {_queue(t.name) for t in (*NODE_TASKS.values(), tool, coordinate, start_batch)}
    assert every <= set(WORKER_QUEUES)


def test_a_task_id_names_the_run_the_task_and_its_version_or_tool_call() -> None:
    assert node_task_id("r1", "coordinate", 0) == "r1-coordinate-0"
    assert node_task_id("r1", "tool", "tc-7") == "r1-tool-tc-7"
