"""Fixtures for the fake Messages API server: a running fake and an official SDK client on it."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from fake_anthropic import FakeAnthropic


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A fake server on a free 127.0.0.1 port, stopped (threads joined) after the test."""
    with FakeAnthropic(hang_seconds=10.0) as running:
        yield running


@pytest.fixture
def client(fake: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    """The official SDK pointed at the fake, retries off as Verity runs it."""
    with anthropic.Anthropic(api_key="test", base_url=fake.base_url, max_retries=0) as sdk:
        yield sdk
