"""`verity export RUN_ID --format anthropic`: a stored run printed as one Anthropic Messages
transcript, which `verity import --format anthropic` checks back to the run's claims and verdict
(offline judges, as the run had); an unknown format is one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.bundle import RunBundle
from models.executor import ExecutorEvidenceV2
from pipeline.importers.anthropic import parse
from pipeline.importers.messages_export import anthropic_transcript
from tests.conftest import cli_env, run_verity

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path / "home")


def test_export__anthropic_prints_the_stored_run_as_one_transcript(env: dict[str, str]) -> None:
    ran = run_verity("run", "Why is checkout-service returning 500s?", "--scenario",
                     "checkout-pool-exhaustion", "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    exported = run_verity("export", run_id, "--format", "anthropic", env=env)
    assert exported.returncode == 0, exported.stderr
    assert exported.stderr == "" and exported.stdout.count("\n") == 1
    bundle = RunBundle.model_validate_json(run_verity("export", run_id, env=env).stdout)
    assert json.loads(exported.stdout) == anthropic_transcript(bundle)
    imported = parse(exported.stdout)
    assert [c.call_id for c in imported.calls] == [i.tool_call_id for i in bundle.invocations]
    checked = run_verity("import", "-", "--format", "anthropic", "--json", env=env,
                         stdin=exported.stdout)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    stated = ExecutorEvidenceV2.model_validate_json(bundle.executor_output_raw).claims
    assert [c["text"] for c in report["claims"] if not c["action"]] == [c.text for c in stated]
    assert report["verdict"] == json.loads(ran.stdout)["verdict"] == "PASS"


def test_export__an_unknown_format_is_one_line_exit_2(env: dict[str, str]) -> None:
    done = run_verity("export", "run-1", "--format", "openai", env=env)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("verity: error: ")
    assert "'bundle', 'anthropic'" in lines[0]
