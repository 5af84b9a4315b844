"""`verity sources`, `verity sources check` and `verity run --source`, as a user runs them.

`sources check` probes real HTTP: a server started here answers like Prometheus's
`/api/v1/status/buildinfo`. Until the Prometheus backend is in the tree, the probe behind the
`prometheus` table is `tests.sources.fakes.BuildinfoProbe` (a `BackendClient` GET), swapped in
for the in-process runs; the real class is probed too once it exists.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from pipeline.scenarios import default_scenarios_dir
from pipeline.sources import composite as composite_module
from tests.conftest import cli_env, run_verity

TOKEN = "s3cret-token-value"
BUILDINFO = {"status": "success", "data": {"version": "2.53.1", "revision": "abc",
                                           "branch": "HEAD", "goVersion": "go1.22"}}


class _Prometheus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, {"status": "error", "error": "unauthorized"})
        elif self.path == "/api/v1/status/buildinfo":
            self._send(200, BUILDINFO)
        else:
            self._send(404, {"status": "error", "error": "not found"})

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def prometheus_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def config(tmp_path: Path, prometheus_url: str) -> Path:
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "pool.md").write_text(
        "---\ndoc_id: RB-POOL\ntitle: Connection pool exhausted\n---\n1. Raise the pool\n",
        encoding="utf-8")
    file = tmp_path / "config.toml"
    file.write_text(f"""
[sources.live]
description = "A Prometheus answering here"
runbooks = {{ path = "runbooks" }}
[sources.live.prometheus]
url = "{prometheus_url}"
auth = {{ type = "bearer", token_env = "TEST_PROM_TOKEN" }}

[sources.down]
prometheus = {{ url = "http://127.0.0.1:{_closed_port()}", connect_timeout_s = 1 }}

[sources.bare]
description = "Runbooks and nothing else"
runbooks = {{ path = "runbooks" }}

[sources.demo]
scenario = "checkout-pool-exhaustion"
""", encoding="utf-8")
    return file


def _in_process(args: list[str], capsys: pytest.CaptureFixture[str],
                monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["verity", *args])
    with pytest.raises(SystemExit) as done:
        main()
    captured = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


@pytest.fixture
def probe(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs see the sources file and probe Prometheus through BuildinfoProbe."""
    monkeypatch.setenv("VERITY_CONFIG", str(config))
    monkeypatch.setenv("TEST_PROM_TOKEN", TOKEN)
    monkeypatch.setitem(composite_module.BACKEND_CLASSES, "prometheus",
                        ("tests.sources.fakes", "BuildinfoProbe"))


def _env(tmp_path: Path, config: Path | None) -> dict[str, str]:
    home = tmp_path / "home"
    return cli_env(home) if config is None else cli_env(home, VERITY_CONFIG=str(config))


# -- verity sources --------------------------------------------------------------------------


def test_sources__json_lists_configured_sources_then_shipped_scenarios(
    tmp_path: Path, config: Path, prometheus_url: str,
) -> None:
    done = run_verity("sources", "--json", env=_env(tmp_path, config))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    payload = json.loads(done.stdout)
    assert payload["config"] == str(config)
    by_name = {s["name"]: s for s in payload["sources"]}
    assert list(by_name)[:4] == ["live", "down", "bare", "demo"]
    assert by_name["live"]["kind"] == "backends"
    assert by_name["live"]["backends"] == [
        {"backend": "prometheus", "url": prometheus_url},
        {"backend": "runbooks", "url": str((config.parent / "runbooks").resolve())}]
    assert by_name["demo"] == {"name": "demo", "kind": "scenario", "description": "",
                               "backends": [], "scenario": str(
                                   default_scenarios_dir() / "checkout-pool-exhaustion")}
    shipped = [n for n in by_name if n.startswith("scenario:")]
    assert "scenario:checkout-pool-exhaustion" in shipped and len(shipped) == 9


def test_sources__text_one_line_per_source(tmp_path: Path, config: Path,
                                           prometheus_url: str) -> None:
    done = run_verity("sources", env=_env(tmp_path, config))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"sources file {config}"
    assert lines[1].startswith(f"live  backends  A Prometheus answering here  prometheus "
                               f"{prometheus_url}, runbooks ")
    assert any(line.startswith("scenario:billing-no-evidence  scenario  ") for line in lines)


def test_sources__without_a_file_only_the_shipped_scenarios(tmp_path: Path) -> None:
    env = {**_env(tmp_path, None), "XDG_CONFIG_HOME": str(tmp_path / "empty")}
    done = run_verity("sources", "--json", env=env)
    payload = json.loads(done.stdout)
    assert payload["config"] is None
    assert all(s["name"].startswith("scenario:") for s in payload["sources"])


def test_sources__a_broken_file_is_one_line_exit_2(tmp_path: Path) -> None:
    """Exit 2 from the sources commands; `run` exits 1, as for any other ConfigurationError."""
    broken = tmp_path / "config.toml"
    broken.write_text('[sources.x.prometheus]\nurl = "prometheus:9090"\n', encoding="utf-8")
    for args, code in ((["sources"], 2), (["sources", "check", "x"], 2),
                       (["run", "why?", "--source", "x"], 1)):
        done = run_verity(*args, env=_env(tmp_path, broken))
        assert done.returncode == code, (args, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and "sources.x.prometheus.url" in lines[0], lines


# -- verity sources check --------------------------------------------------------------------


@pytest.mark.usefixtures("probe")
def test_check__a_reachable_prometheus_one_line_per_backend_exit_0(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, prometheus_url: str,
) -> None:
    code, out, err = _in_process(["sources", "check", "live"], capsys, monkeypatch)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"prometheus    {prometheus_url}  reachable  version 2.53.1  auth ok"
    assert lines[1].startswith("runbooks      ") and lines[1].endswith("reachable  1 runbooks")
    assert len(lines) == 2


@pytest.mark.usefixtures("probe")
def test_check__refused_credentials_exit_1_without_the_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_PROM_TOKEN", "wrong-" + TOKEN)
    code, out, _ = _in_process(["sources", "check", "live", "--json"], capsys, monkeypatch)
    assert code == 1
    payload = json.loads(out)
    assert payload["ok"] is False
    assert payload["backends"][0]["auth_ok"] is False
    assert "refused the credentials (HTTP 401)" in payload["backends"][0]["detail"]
    assert TOKEN not in out


@pytest.mark.usefixtures("probe")
def test_check__an_unreachable_backend_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, _ = _in_process(["sources", "check", "down"], capsys, monkeypatch)
    assert code == 1
    (line,) = out.splitlines()
    assert "UNREACHABLE" in line and "down/prometheus unreachable" in line


@pytest.mark.usefixtures("probe")
def test_check__a_missing_token_variable_is_reported_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TEST_PROM_TOKEN")
    code, out, _ = _in_process(["sources", "check", "live"], capsys, monkeypatch)
    assert code == 1
    assert "needs the environment variable TEST_PROM_TOKEN, which is not set" in out


@pytest.mark.usefixtures("probe")
@pytest.mark.parametrize(("name", "code", "text"), [
    pytest.param("demo", 0, "reachable  5841 log lines", id="configured-scenario"),
    pytest.param("scenario:billing-no-evidence", 0, "reachable  4022 log lines", id="shipped"),
])
def test_check__a_scenario_source_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    name: str, code: int, text: str,
) -> None:
    done, out, _ = _in_process(["sources", "check", name], capsys, monkeypatch)
    assert done == code and len(out.splitlines()) == 1 and text in out


@pytest.mark.usefixtures("probe")
def test_check__an_unknown_source_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = _in_process(["sources", "check", "nope"], capsys, monkeypatch)
    assert (code, out) == (2, "")
    assert err.startswith("verity: error: unknown source 'nope' (known: live, down, bare, demo;")


def test_check__the_real_prometheus_backend(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    prometheus_url: str,
) -> None:
    pytest.importorskip("pipeline.sources.prometheus")
    monkeypatch.setenv("VERITY_CONFIG", str(config))
    monkeypatch.setenv("TEST_PROM_TOKEN", TOKEN)
    code, out, _ = _in_process(["sources", "check", "live"], capsys, monkeypatch)
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"prometheus    {prometheus_url}  reachable  "
                                          "version 2.53.1")


# -- verity run --source ---------------------------------------------------------------------


@pytest.mark.slow
def test_run__a_configured_scenario_source(tmp_path: Path, config: Path) -> None:
    env = _env(tmp_path, config)
    done = run_verity("run", "Why is checkout-service returning 500s?", "--source", "demo",
                      "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["verdict"]) == ("SUCCESS", "PASS")
    assert "v2.3.1" in result["final_answer"]["answer_summary"]
    shown = json.loads(run_verity("show", result["run_id"], "--json", env=env).stdout)
    assert shown["data_source"] == "demo"


@pytest.mark.slow
def test_run__an_unknown_source_is_refused_at_submit_with_nothing_written(
    tmp_path: Path, config: Path,
) -> None:
    env = _env(tmp_path, config)
    done = run_verity("run", "why?", "--source", "nope", env=env)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("verity: error: unknown source 'nope' (known: live, down, bare, demo;")
    runs = json.loads(run_verity("runs", "--json", env=env).stdout)
    assert runs["runs"] == []


@pytest.mark.slow
def test_run__a_capability_without_a_backend_is_an_error_invocation_and_the_run_ends(
    tmp_path: Path, config: Path,
) -> None:
    env = _env(tmp_path, config)
    done = run_verity("run", "Why is checkout-service returning 500s?", "--source", "bare",
                      "--at", "2026-11-30T15:00:00Z", "--json", env=env)
    assert done.returncode in (0, 1), done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    shown = json.loads(run_verity("show", run_id, "--json", env=env).stdout)
    assert shown["data_source"] == "bare@2026-11-30T15:00:00Z"
    assert shown["status"] in ("SUCCESS", "FALLBACK")
    bundle = json.loads(run_verity("export", run_id, env=env).stdout)
    errors = {i["tool_name"]: i["error"] for i in bundle["invocations"] if i["error"]}
    assert errors["search_logs"] == ("SourceError: bare has no logs backend "
                                     "(configure [sources.bare.loki])")
    assert all(i["status"] == "ERROR" for i in bundle["invocations"]
               if i["tool_name"] != "search_runbooks")


def test_run__source_and_scenario_together_are_refused(tmp_path: Path, config: Path) -> None:
    done = run_verity("run", "why?", "--source", "demo", "--scenario", "billing-no-evidence",
                      env=_env(tmp_path, config))
    assert done.returncode == 2
    assert "give one of --source, --scenario and --scenario-dir" in done.stderr


def test_run__a_bad_at_is_one_line_exit_2(tmp_path: Path, config: Path) -> None:
    done = run_verity("run", "why?", "--source", "demo", "--at", "yesterday",
                      env=_env(tmp_path, config))
    assert done.returncode == 2
    assert "'yesterday' is not an ISO 8601 time" in done.stderr
