"""The graph's node bodies, one module per role: each reads a `NodeInput` and returns a `Step`.

Bodies decide nothing about what comes next: `pipeline/graph.py` routes each step by the rules
of `pipeline/routing.py`. They import no broker and no database, so the Celery runtime,
`verity verify` and the in-process runner all run the same code.
"""
