"""Browser tests: Debian's Chromium, headless, driven by Playwright, against the API's world
(`tests/api/conftest.py`: `verity serve` on a free port, real workers on Redis and PostgreSQL,
Claude agents on the fake Anthropic server). A missing Chromium or Playwright skips, and fails
under CI=true. Never `playwright install`: the browser is Debian's (`scripts/services.sh`).

`check/` holds another agent's answer and the tool output it was given, for `stored_check`:
`verity check-answer --answer check/answer.md --evidence check/list_deployments.json` judges
its first sentence observed, its second contradicted (the pool went to 20, not 10) and its
third unsupported (no tool output speaks of it); the fourth is a recommended action. The answer
opens with an emoji (two UTF-16 units, one code point: the spans are Python's offsets) and has
markup in it (`<b>x</b>`, to be shown as written)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import World, database_url_module, world  # noqa: F401 - the shared world

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]
CHECK = Path(__file__).resolve().parent / "check"
CHECK_QUESTION = "Why is checkout-service returning 500s?"


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
    """A fresh page (its own localStorage) whose script errors, and anything the
    Content-Security-Policy refuses, fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda message: errors.append(message.text)
              if "Content Security Policy" in message.text else None)
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


@dataclass(frozen=True)
class StoredCheck:
    """A tenant's token and the report `POST /checks` gave for its stored check."""

    secret: str
    report: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.report["run_id"])

    def claim(self, verification: str | None, *, action: bool = False) -> dict[str, Any]:
        """The report's one claim judged `verification` (action=True: the recommended
        action judged so)."""
        found = [c for c in self.report["claims"]
                 if c["verification"] == verification and c["action"] is action]
        assert len(found) == 1, (verification, self.report["claims"])
        return found[0]


@pytest.fixture
def stored_check(world: World) -> StoredCheck:  # noqa: F811 - the shared world fixture
    """A new tenant whose one run is the offline check (format files) of `check/answer.md`
    against `check/list_deployments.json`: one claim observed, one contradicted, one
    unsupported, one recommended action (unsupported: it follows from no kept claim)."""
    secret = world.token()
    evidence = CHECK / "list_deployments.json"
    body = {"format": "files", "question": CHECK_QUESTION, "provider": "offline",
            "answer": (CHECK / "answer.md").read_text(encoding="utf-8"),
            "evidence": [{"name": evidence.name, "content": evidence.read_text(encoding="utf-8")}]}
    with world.http(secret) as http:
        created = http.post("/checks", json=body)
    assert created.status_code == 201, created.text
    report: dict[str, Any] = created.json()
    judged = [(c["verification"], c["action"]) for c in report["claims"]]
    # the action is judged too: "roll back checkout-service to v2.3.0" follows from no kept
    # claim (the observed deploy names v2.3.1; the contradicted one is not kept)
    assert judged == [("direct_observation", False), ("contradicted", False),
                      ("unsupported", False), ("unsupported", True)], judged
    return StoredCheck(secret=secret, report=report)
