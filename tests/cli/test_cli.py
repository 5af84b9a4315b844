"""`verity verify`, `show` and `schema` as a user runs them: a real process, real exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_verity

ROOT = Path(__file__).resolve().parents[2]
PASS_BUNDLE = ROOT / "samples" / "bundles" / "pass.json"


def test_cli__verify_json_prints_exactly_one_object(env: dict[str, str]) -> None:
    done = run_verity("verify", str(PASS_BUNDLE), "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert list(result) == ["run_id", "status", "verdict", "fallback_type", "final_answer",
                            "self_evaluation"]
    outcome = (result["status"], result["verdict"], result["fallback_type"])
    assert outcome == ("SUCCESS", "PASS", None)
    assert set(result["final_answer"]) == {"answer_summary", "recommended_actions",
                                           "user_facing_answer"}
    assert set(result["self_evaluation"]) == {"rule_evaluation", "aiops_rule_evaluation",
                                              "verifier_evaluation"}
    assert done.stderr == ""


def test_cli__verify_without_store_writes_nothing(env: dict[str, str], tmp_path: Path) -> None:
    done = run_verity("verify", str(PASS_BUNDLE), "--json", env=env)
    assert done.returncode == 0
    assert not (tmp_path / "home").exists()
    run_id = json.loads(done.stdout)["run_id"]
    shown = run_verity("show", run_id, env=env)
    assert shown.returncode == 2
    assert shown.stderr.strip() == f"verity: error: no run with id {run_id!r}"


def test_cli__verify_store_then_show(env: dict[str, str]) -> None:
    done = run_verity("verify", str(PASS_BUNDLE), "--json", "--store", env=env)
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)
    shown = run_verity("show", stored["run_id"], "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["status"] == "SUCCESS" and record["verdict"] == "PASS"
    assert record["self_evaluation"] == stored["self_evaluation"]
    assert record["final_answer"] == stored["final_answer"]
    assert [a["role"] for a in record["attempts"]] == ["verifier", "composer"]
    assert len(record["invocations"]) == 3
    human = run_verity("show", stored["run_id"], env=env)
    assert human.returncode == 0 and "PASS" in human.stdout and "Claims" in human.stdout


@pytest.mark.postgres
def test_cli__verify_store_on_postgres(env: dict[str, str], postgres_url: str) -> None:
    pg_env = {**env, "VERITY_DATABASE_URL": postgres_url}
    done = run_verity("verify", str(PASS_BUNDLE), "--json", "--store", env=pg_env)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    shown = run_verity("show", run_id, "--json", env=pg_env)
    assert json.loads(shown.stdout)["run_id"] == run_id


def _duplicate_bundle() -> str:
    bundle = json.loads(PASS_BUNDLE.read_text())
    bundle["invocations"].append(dict(bundle["invocations"][1]))
    return json.dumps(bundle)


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        pytest.param("not json at all", "verity: error: bundle is not JSON", id="not-json"),
        pytest.param("[1, 2]", "verity: error: bundle must be a JSON object", id="not-object"),
        pytest.param('{"query": "why?"}', "verity: error: bundle has the wrong shape",
                     id="wrong-shape"),
        pytest.param(_duplicate_bundle(),
                     "verity: error: duplicate tool_call_id 'toolu_01METRd4e5f6' in bundle",
                     id="duplicate-tool-call-id"),
    ],
)
def test_cli__unusable_bundle_is_one_line_exit_2(
    env: dict[str, str], tmp_path: Path, stdin: str, message: str
) -> None:
    done = run_verity("verify", "-", "--json", "--store", env=env, stdin=stdin)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message)
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "home").exists()  # nothing stored, not even an empty database


def test_cli__missing_file_and_usage_errors(env: dict[str, str]) -> None:
    missing = run_verity("verify", "/no/such/bundle.json", env=env)
    assert (missing.returncode, missing.stderr.strip()) == (
        2, "verity: error: no such file: /no/such/bundle.json")
    usage = run_verity("verify", env=env)
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1


def test_cli__schema_prints_json_schema(env: dict[str, str]) -> None:
    done = run_verity("schema", "executor_evidence_v2", env=env)
    assert done.returncode == 0
    schema = json.loads(done.stdout)
    assert schema["additionalProperties"] is False
    assert "claims" in schema["required"]
    unknown = run_verity("schema", "nope", env=env)
    assert unknown.returncode == 2 and "known: " in unknown.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--queues", "llm,bogus"], "verity: error: --queues: bogus; choose among control, llm, "
                                    "tools, batch"),
        (["--queues", " , "], "verity: error: --queues: none given; choose among control, llm, "
                              "tools, batch"),
        (["--concurrency", "0"], "verity: error: --concurrency must be at least 1"),
    ],
)
def test_cli__worker_refuses_bad_queues_and_concurrency_in_one_line(
    env: dict[str, str], args: list[str], message: str
) -> None:
    # checked before anything connects: the broker URL need not answer
    done = run_verity("worker", *args, env={**env, "VERITY_BROKER_URL": "redis://127.0.0.1:1/0"})
    assert (done.returncode, done.stderr.strip(), done.stdout) == (2, message, "")


def test_cli__worker_needs_a_broker(env: dict[str, str]) -> None:
    done = run_verity("worker", env=env)
    assert done.returncode == 1  # a configuration error, as a missing API key is
    assert done.stderr.strip().startswith("verity: error: set VERITY_BROKER_URL")


def test_cli__worker_refuses_a_lease_ttl_the_visibility_timeout_would_outlive(
    env: dict[str, str]
) -> None:
    done = run_verity("worker", env={**env, "VERITY_BROKER_URL": "redis://127.0.0.1:1/0",
                                  "VERITY_LEASE_TTL_S": "400"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        "verity: error: VERITY_LEASE_TTL_S=400 must be at most half of "
        "VERITY_VISIBILITY_TIMEOUT=600: a redelivered node would find the dead copy's lease "
        "still live")
