"""The live stack (tests/live/stack.py) and the incident timeline's answers, once per label
convention per session. Missing binaries skip the tests, and fail them under `CI=true`. Every
test here is marked `prometheus` and `slow`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.runs import ALERTMANAGER_ONLY, Answer, Asker, play
from tests.live.stack import CONVENTIONS, Convention, LiveStack, missing_binaries
from tests.sources.prom_harness import HarnessError, service_missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.prometheus)
            item.add_marker(pytest.mark.slow)


class Timeline:
    """A stack of one convention after the timeline ran: its answers, by moment."""

    def __init__(self, stack: LiveStack, answers: dict[str, Answer]) -> None:
        self.stack = stack
        self.answers = answers


@pytest.fixture(scope="session", params=CONVENTIONS)
def timeline(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Timeline]:
    """The stack of convention `request.param`, driven through the whole timeline."""
    convention: Convention = request.param
    missing = missing_binaries()
    if missing:
        service_missing("the live stack", f"not installed: {', '.join(missing)}")
    try:
        with LiveStack.start(convention) as stack:
            asker = Asker(tmp_path_factory.mktemp(f"live-{convention}"), {
                "live": stack.sources_table(),
                ALERTMANAGER_ONLY: {"alertmanager": {"url": stack.alertmanager.url}}})
            answers = play(stack, asker.ask)
            yield Timeline(stack, answers)
    except HarnessError as exc:
        service_missing("the live stack", str(exc).splitlines()[0])
