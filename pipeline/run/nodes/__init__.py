"""The graph's nodes, one module each, named after the node: its body (`body(ctx, inp) -> Step`,
what the graph runs) and the pure state step it wraps (`verify.verify_node`, ...), which
`verity verify` and the tests drive directly. Bodies decide nothing about what comes next:
`pipeline/run/graph.py` routes each step by the rules of `pipeline/rules/routing.py`. They import
no broker and no database, so the Celery runtime, `verity verify` and the in-process runner all
run the same code.
"""

from pipeline.run.nodes.compose import compose_node, prepare_composition
from pipeline.run.nodes.fallback import fallback_node
from pipeline.run.nodes.gatekeep import gatekeep_node, parse_node, structural_problems
from pipeline.run.nodes.verify import verify_node

__all__ = ["compose_node", "fallback_node", "gatekeep_node", "parse_node", "prepare_composition",
           "structural_problems", "verify_node"]
