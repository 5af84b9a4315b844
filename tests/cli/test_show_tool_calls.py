"""`verity show` lists every tool call with its one-line error (issue 23, item 5): a missing
or unreachable backend was only "the call failed" in the answer, its reason only in
`verity export`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.conftest import run_verity


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_show__lists_every_tool_call_with_its_error(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[sources.dead]\nprometheus = {{ url = "http://127.0.0.1:'
                      f'{_closed_port()}" }}\n', encoding="utf-8")
    env = {**env, "VERITY_CONFIG": str(config), "VERITY_PROVIDER": "offline",
           "VERITY_DATABASE_URL": f"sqlite:///{tmp_path / 'runs.db'}"}
    done = run_verity("run", "Why is checkout-service returning 500s?", "--source", "dead",
                      "--json", env=env)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]

    shown = json.loads(run_verity("show", run_id, "--json", env=env).stdout)
    calls = {c["tool_name"]: c for c in shown["invocations"]}
    assert calls["search_logs"]["error"] == (
        "SourceError: dead has no logs backend (configure [sources.dead.loki])")
    assert calls["query_metrics"]["error"].startswith(
        "BackendUnreachableError: dead/prometheus unreachable")
    assert calls["query_metrics"]["arguments"] == {"service": "checkout-service",
                                                   "metric": "error"}

    human = run_verity("show", run_id, env={**env, "COLUMNS": "250"}).stdout  # no wrapping
    assert "Tool calls" in human
    for call in shown["invocations"]:
        assert call["tool_name"] in human
    assert "no logs backend" in human and "unreachable" in human
    assert "(configure [sources.dead.loki])" in human  # the error as text, not as markup
