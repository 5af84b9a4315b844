"""The bare Celery baseline: no-op tasks in a canvas of the runtime's shape."""

from __future__ import annotations

import time

from celery import chain, chord

from tasks.app import app


@app.task(name="bench.bare.step")
def step(*_args: object) -> float:
    """Do nothing; return when it ran."""
    return time.time()


def canvas(tool_calls: int) -> chain:
    """coordinate, plan, execute, chord(tools) -> coordinate, execute, gatekeep, verify,
    compose, finalize: the task count of one instant run."""
    s = step.si
    return chain(
        s(), s(), s(), chord([s() for _ in range(tool_calls)], s()), s(), s(), s(), s(), s(),
    )
