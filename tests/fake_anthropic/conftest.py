"""Fixtures for the fake Messages API server: a running fake and an official SDK client on it.

One server and one client per test module (building an SDK client costs tens of milliseconds:
its TLS context); every test starts from `reset()`, which is itself under test here.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from fake_anthropic import FakeAnthropic


@pytest.fixture(scope="module")
def _running() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(hang_seconds=10.0) as running:
        yield running


@pytest.fixture(scope="module")
def _sdk(_running: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="test", base_url=_running.base_url, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def fake(_running: FakeAnthropic) -> FakeAnthropic:
    """The module's fake server on a free 127.0.0.1 port, freshly reset."""
    _running.reset()
    return _running


@pytest.fixture
def client(fake: FakeAnthropic, _sdk: anthropic.Anthropic) -> anthropic.Anthropic:
    """The official SDK pointed at the fake, retries off as Verity runs it."""
    return _sdk
