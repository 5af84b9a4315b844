"""`verity serve --embedded`: one command, no services. It prints the page's URL with a fresh
token, a POSTed run executes in the process (worker thread on memory://, the SQLite file), the
page is served, and the token dies with the server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pipeline.store import open_store
from tests.api.conftest import ROOT

pytestmark = pytest.mark.slow
URL = re.compile(rb"Verity on (http://127\.0\.0\.1:\d+)/#token=(vrt_[A-Za-z0-9_-]+)")


def _env(home: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {**clean, "VERITY_HOME": str(home), "VERITY_PROVIDER": "offline", **extra}


def test_serve_embedded_runs_a_posted_run_and_serves_the_page(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--embedded", "--port", "0"], cwd=ROOT,
            env=_env(tmp_path / "home"), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (found := URL.search(log.read_bytes())):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        base, secret = found.group(1).decode(), found.group(2).decode()
        with httpx.Client(base_url=base, timeout=30,
                          headers={"authorization": f"Bearer {secret}"}) as http:
            page = http.get("/")
            assert page.status_code == 200 and 'src="/main.js"' in page.text
            sources = [s["name"] for s in http.get("/sources").json()["sources"]]
            assert "scenario:checkout-pool-exhaustion" in sources
            created = http.post("/runs", json={"question": "Why is checkout-service returning "
                                               "500s?", "source": sources[0]})
            assert created.status_code == 202, created.text
            run_id = created.json()["run_id"]
            while (record := http.get(f"/runs/{run_id}").json())["status"] in ("PENDING",
                                                                               "RUNNING"):
                assert time.monotonic() < deadline + 30, record["status"]
                time.sleep(0.1)
            assert record["status"] == "SUCCESS" and record["tenant_id"] == "default"
            assert http.get("/readyz").json()["checks"] == {"database": "ok", "broker": "ok"}
            # kept-alive requests answer at once (no Nagle wait: ~40 ms each without NODELAY)
            took = []
            for _ in range(9):
                started = time.perf_counter()
                http.get("/healthz")
                took.append(time.perf_counter() - started)
            assert sorted(took)[4] < 0.025, took
    finally:
        server.terminate()
        server.wait(15)
    with open_store(f"sqlite:///{tmp_path / 'home' / 'verity.db'}") as store:
        (token,) = store.list_tokens()
    assert token.name == "serve-embedded" and token.revoked_at is not None


def test_serve_embedded_with_a_broker_configured_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "serve", "--embedded", "--port", "0"], cwd=ROOT,
        env=_env(tmp_path, VERITY_BROKER_URL="redis://127.0.0.1:1/0"), capture_output=True,
        text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "unset VERITY_BROKER_URL" in done.stderr
