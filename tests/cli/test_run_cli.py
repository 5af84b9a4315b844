"""`verity run` on the embedded default (in-process worker, memory transport, SQLite), and the
commands around it, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli_env, run_verity

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return cli_env(tmp_path_factory.mktemp("home"))


def _run_json(env: dict[str, str], query: str, *extra: str) -> dict[str, object]:
    done = run_verity("run", query, *extra, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_run__embedded_default_end_to_end(env: dict[str, str]) -> None:
    result = _run_json(env, "Why is checkout-service returning 500s?",
                       "--scenario", "checkout-pool-exhaustion")
    assert list(result) == ["run_id", "intent", "status", "verdict", "fallback_type",
                            "final_answer", "self_evaluation"]
    assert (result["status"], result["verdict"], result["intent"]) == (
        "SUCCESS", "PASS", "DIAGNOSIS")
    answer = result["final_answer"]
    assert isinstance(answer, dict) and "v2.3.1" in answer["answer_summary"]


def test_run__shows_progress_then_the_answer(env: dict[str, str]) -> None:
    done = run_verity("run", "Why does inventory-service keep restarting?",
                      "--scenario", "inventory-oom-crashloop", env=env)
    assert done.returncode == 0, done.stderr
    for node in ("plan", "execute", "gatekeep", "verify", "compose", "finalize"):
        assert node in done.stderr
    assert "verdict PASS" in done.stdout and "Claims" in done.stdout


def test_run__export_reproduces_the_stored_verdict(env: dict[str, str], tmp_path: Path) -> None:
    result = _run_json(env, "Why is orders-api so slow?", "--scenario",
                       "orders-latency-payment-gateway")
    exported = run_verity("export", str(result["run_id"]), env=env)
    assert exported.returncode == 0, exported.stderr
    bundle = tmp_path / "bundle.json"
    bundle.write_text(exported.stdout)
    verified = json.loads(run_verity("verify", str(bundle), "--json", env=env).stdout)
    assert (verified["status"], verified["verdict"], verified["fallback_type"]) == (
        result["status"], result["verdict"], result["fallback_type"])
    assert verified["final_answer"] == result["final_answer"]


def test_run__follow_up_uses_the_previous_successful_turn(env: dict[str, str]) -> None:
    first = _run_json(env, "Why is checkout-service returning 500s?", "--scenario",
                      "checkout-pool-exhaustion", "--session", "sre-42")
    second = _run_json(env, "And what changed right before that?", "--scenario",
                       "checkout-pool-exhaustion", "--session", "sre-42")
    shown = json.loads(run_verity("show", str(second["run_id"]), "--json", env=env).stdout)
    plan = next(e for e in shown["events"] if e["node"] == "plan")
    assert plan["payload"]["previous_turn"] == first["run_id"]


def test_run__knowledge_question_cites_returned_documents(env: dict[str, str]) -> None:
    result = _run_json(env, "How do I rotate the payment-db credentials?", "--scenario",
                       "knowledge-payment-db-credentials")
    assert (result["intent"], result["status"], result["verdict"]) == (
        "KNOWLEDGE_QUERY", "SUCCESS", None)
    answer = result["final_answer"]
    assert isinstance(answer, dict)
    assert "[rb-payment-db-credential-rotation]" in answer["user_facing_answer"]


def test_scenarios__lists_the_shipped_incidents(env: dict[str, str]) -> None:
    done = run_verity("scenarios", "--json", env=env)
    names = {s["name"] for s in json.loads(done.stdout)["scenarios"]}
    assert {"checkout-pool-exhaustion", "billing-no-evidence",
            "knowledge-payment-db-credentials"} <= names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["run", "why?", "--scenario", "no-such-scenario"], "no scenario at",
                     id="unknown-scenario"),
        pytest.param(["run", "why?"], "name a scenario", id="no-scenario"),
        pytest.param(["export", "nope"], "no run with id 'nope'", id="export-unknown-run"),
        pytest.param(["cancel", "nope"], "no run with id 'nope'", id="cancel-unknown-run"),
    ],
)
def test_run__bad_input_is_one_line_exit_2(
    env: dict[str, str], args: list[str], message: str
) -> None:
    done = run_verity(*args, env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr


def _scenarios() -> list[object]:
    from pipeline.scenarios import list_scenarios

    return [pytest.param(info, id=info.name) for info in list_scenarios()]


@pytest.mark.parametrize("info", _scenarios())
def test_run__every_shipped_scenario_on_the_runtime(env: dict[str, str], info: object) -> None:
    from pipeline.scenarios import default_scenarios_dir, load_scenario

    meta = load_scenario(default_scenarios_dir() / info.name).meta  # type: ignore[attr-defined]
    result = _run_json(env, meta.question, "--scenario", meta.name)
    assert result["status"] == meta.expected.status
    if meta.expected.verdicts:
        assert result["verdict"] in meta.expected.verdicts
    answer = result["final_answer"]
    assert isinstance(answer, dict)
    summary = answer["answer_summary"]
    if meta.root_cause is not None:
        for needle in meta.root_cause.must_mention:
            assert needle in summary, (needle, summary)
    else:
        assert not summary.startswith("Root cause")
    for herring in meta.red_herrings:
        for needle in herring.must_not_blame:
            assert needle not in summary, (needle, summary)
    for doc_id in getattr(meta.expected, "cited_documents", []) or []:
        assert f"[{doc_id}]" in answer["user_facing_answer"]
