"""Browser tests: Debian's Chromium, headless, driven by Playwright, against the API's world
(`tests/api/conftest.py`: `verity serve` on a free port, real workers on Redis and PostgreSQL,
Claude agents on the fake Anthropic server). A missing Chromium or Playwright skips, and fails
under CI=true. Never `playwright install`: the browser is Debian's (`scripts/services.sh`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import database_url_module, world  # noqa: F401 - the shared world

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium for the module."""
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} is missing: apt-get install chromium (scripts/services.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (its own localStorage) whose script errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.set_default_timeout(30_000)
    yield opened
    context.close()
    assert not errors, f"script errors on the page: {errors}"


def save_screenshot(page: Any, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot under the test's tmp dir; also docs/screenshots/NAME when
    VERITY_SAVE_SCREENSHOTS=1."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("VERITY_SAVE_SCREENSHOTS") == "1":
        kept = ROOT / "docs" / "screenshots" / name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, kept)
    return shot
