"""The fake as another process (`FakeAnthropic.spawn`, `python -m fake_anthropic`) and its
control API over HTTP."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_anthropic import FakeAnthropic, FakeControl, FakeControlError
from tests.fake_anthropic.helpers import VERIFIER_TOOL, ask

ROOT = Path(__file__).resolve().parents[2]

SCRIPT: dict[str, Any] = {
    "replies": {"verifier": [{"tool_use": {"name": "submit_verifier_output", "input": {"a": 1}}}]},
    "faults": {"composer": ["529"]},
    "role_latency": {"planner": 0.2},
}


def test_process__spawned_server_serves_its_script_and_is_controlled_over_http() -> None:
    with (
        FakeAnthropic.spawn(script=SCRIPT, default_responder="minimal") as fake,
        anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0) as client,
    ):
        assert fake.base_url.startswith("http://127.0.0.1:")
        assert ask(client, "verifier").content[0].input == {"a": 1}
        with pytest.raises(anthropic.OverloadedError):
            ask(client, "composer")
        started = time.monotonic()
        assert ask(client, "planner").content[0].text == "ok"  # the minimal responder
        assert time.monotonic() - started >= 0.2
        fake.fault("verifier", "429", retry_after=3)
        fake.script("verifier", ["second"])
        with pytest.raises(anthropic.RateLimitError) as raised:
            ask(client, "verifier")
        assert raised.value.response.headers["retry-after"] == "3"
        assert ask(client, "verifier").content[0].text == "second"
        roles = [r["role"] for r in fake.requests]
        assert roles == ["verifier", "composer", "planner", "verifier", "verifier"]
        assert [r["seq"] for r in fake.requests_for("planner")] == [2]
        fake.set_latency(0.0, role="planner")
        fake.set_default_responder(None)
        with pytest.raises(anthropic.InternalServerError, match="no scripted reply"):
            ask(client, "planner")
        fake.reset()  # back to the start: the script and the minimal responder again
        assert fake.requests == []
        assert fake.pending() == {
            "replies": {"verifier": 1},
            "faults": {"composer": [{"fault": "529"}]},
        }
        assert ask(client, "verifier").content[0].input == {"a": 1}
        assert ask(client, "knowledge").content[0].text == "ok"
    assert fake.process.returncode is not None


def test_process__record_limit_keeps_the_latest_requests() -> None:
    with (
        FakeAnthropic(record_limit=2, default_responder="minimal") as fake,
        anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0) as client,
    ):
        for role in ("planner", "executor", "verifier"):
            ask(client, role)
        assert [(r["seq"], r["role"]) for r in fake.requests] == [(1, "executor"), (2, "verifier")]


def test_process__module_entry_point_with_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": {"default": ["from the file"]}}))
    argv = [sys.executable, "-m", "fake_anthropic", "--port", "0", "--script", str(script)]
    argv += ["--latency", "0.1", "--required-key", "secret"]
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("listening on http://127.0.0.1:")
            base_url = line.removeprefix("listening on ").strip()
            with anthropic.Anthropic(api_key="secret", base_url=base_url, max_retries=0) as sdk:
                assert ask(sdk).content[0].text == "from the file"
        finally:
            process.terminate()
            assert process.wait(5) == 0  # SIGTERM is a clean stop


def test_process__control_api_refuses_bad_specifications() -> None:
    with FakeAnthropic() as fake:
        control = FakeControl(fake.base_url)
        with pytest.raises(FakeControlError, match="unknown fault"):
            control.faults("planner", ["teapot"])
        with pytest.raises(FakeControlError, match="stop_reason"):
            control.script("planner", {"text": "x", "stop_reason": "bored"})
        with pytest.raises(FakeControlError, match="KeyError"):
            control._call("POST", "/_control/script", {"replies": []})
        with pytest.raises(FakeControlError, match="no_such_module"):
            control.set_default_responder("no_such_module:f")
        control.load({"replies": {"planner": ["a", "b"]}, "latency": 0})
        assert control.pending() == {"replies": {"planner": 2}, "faults": {}}
        assert fake.pending() == control.pending()


def test_process__unknown_paths_are_404() -> None:
    with FakeAnthropic() as fake:
        connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
        try:
            connection.request("GET", "/v1/models")
            response = connection.getresponse()
            body = json.loads(response.read())
        finally:
            connection.close()
    assert response.status == 404 and body["error"]["type"] == "not_found_error"


def test_process__spawn_reports_a_failed_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="did not start"):
        FakeAnthropic.spawn(script=tmp_path / "missing.json")


def test_process__minimal_responder_fills_a_forced_tool_over_http() -> None:
    with (
        FakeAnthropic.spawn(default_responder="minimal") as fake,
        anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0) as client,
    ):
        forced = {"type": "tool", "name": "submit_verifier_output"}
        message = ask(client, tools=[VERIFIER_TOOL], tool_choice=forced)
        assert message.content[0].input == {"verdict": "", "score": 0.0}


def test_process__command_line_flags_merge_into_the_start_script() -> None:
    from fake_anthropic.__main__ import argument_parser, start_document
    from fake_anthropic.process import command

    argv = command(
        latency=1.0,
        role_latency={"verifier": 0.5},
        script={"latency": 9, "role_latency": {"planner": 2}, "replies": {"p": ["x"]}},
        default_responder="executor=minimal",
        record_limit=10,
    )
    args = argument_parser().parse_args(argv[3:])
    assert args.record_limit == 10
    assert start_document(args) == {
        "latency": 1.0,
        "role_latency": {"planner": 2, "verifier": 0.5},
        "replies": {"p": ["x"]},
        "responders": {"executor": "minimal"},
    }
