"""The CLI suites' fixture: the environment `verity` runs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment (`cli_env`) with this test's own VERITY_HOME."""
    return cli_env(tmp_path / "home")
