"""`--tenant` on the commands that touch runs: a real process, real exit codes. Without it the
CLI acts as VERITY_TENANT, else as `default` (the README's commands need no setup)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_verity

ROOT = Path(__file__).resolve().parents[2]
PASS_BUNDLE = ROOT / "samples" / "bundles" / "pass.json"


def _refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    return lines[0]


def test_tenant__a_stored_run_is_its_tenants_only(env: dict[str, str]) -> None:
    done = run_verity("verify", str(PASS_BUNDLE), "--json", "--store", "--tenant", "team-a",
                      env=env)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]

    shown = run_verity("show", run_id, "--json", "--tenant", "team-a", env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["tenant_id"] == "team-a"
    assert run_verity("export", run_id, "--tenant", "team-a", env=env).returncode == 0
    listed = json.loads(run_verity("runs", "--json", "--tenant", "team-a", env=env).stdout)
    assert [r["run_id"] for r in listed["runs"]] == [run_id]
    as_env = run_verity("show", run_id, "--json", env={**env, "VERITY_TENANT": "team-a"})
    assert as_env.returncode == 0, as_env.stderr

    # as `default` (no --tenant) and as another tenant: exactly an unknown id's refusal
    for command in ("show", "export", "cancel"):
        unknown = _refused(run_verity(command, "no-such-run", env=env))
        assert unknown == "verity: error: no run with id 'no-such-run'"
        expected = unknown.replace("no-such-run", run_id)
        assert _refused(run_verity(command, run_id, env=env)) == expected
        assert _refused(run_verity(command, run_id, "--tenant", "team-b", env=env)) == expected
    listed = json.loads(run_verity("runs", "--json", env=env).stdout)
    assert listed == {"tenant_id": "default", "runs": []}


@pytest.mark.parametrize("command", [
    ["run", "why?", "--scenario", "checkout-pool-exhaustion"], ["runs"], ["show", "r1"],
    ["cancel", "r1"], ["export", "r1"], ["verify", str(PASS_BUNDLE), "--store"],
], ids=["run", "runs", "show", "cancel", "export", "verify"])
def test_tenant__a_bad_tenant_id_is_one_line_exit_2(
    env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    line = _refused(run_verity(*command, "--tenant", "team a", env=env))
    assert line == "verity: error: tenant id 'team a' may hold only A-Z a-z 0-9 . _ : @ -"
    line = _refused(run_verity(*command, env={**env, "VERITY_TENANT": "x" * 129}))
    assert line == "verity: error: tenant id must be at most 128 characters"
    assert not (tmp_path / "home").exists()  # refused before any database is opened


def test_tenant__sessions_are_per_tenant(env: dict[str, str]) -> None:
    def run(tenant: str) -> str:
        done = run_verity("run", "Why is checkout-service returning 500s?", "--scenario",
                          "checkout-pool-exhaustion", "--session", "sre-42", "--json",
                          "--tenant", tenant, env=env)
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["run_id"])

    def previous_turn(run_id: str, tenant: str) -> object:
        shown = json.loads(run_verity("show", run_id, "--json", "--tenant", tenant,
                                      env=env).stdout)
        plan = next(e for e in shown["events"] if e["node"] == "plan")
        return plan["payload"]["previous_turn"]

    first = run("team-a")
    assert previous_turn(run("team-b"), "team-b") is None
    assert previous_turn(run("team-a"), "team-a") == first
