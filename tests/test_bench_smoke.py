"""The bench scripts run, print exactly one JSON object, and their figures are sane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_smoke__gatekeeper_prints_one_json_object() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gatekeeper.py"),
         "--claims", "50", "--repeat", "1", "--min-time", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is one JSON object and nothing else
    assert {"python", "cpu_count", "pinned", "pinned_cpu", "repeat", "claims",
            "target_bindings_per_s", "gatekeeper", "verify_bundle"} <= set(report)
    assert report["repeat"] == 1 and report["claims"] == 50
    assert report["cpu_count"] >= 1
    assert report["pinned"] is (report["pinned_cpu"] is not None)

    valid, failing = report["gatekeeper"]["valid"], report["gatekeeper"]["failing"]
    for figures in (valid, failing):
        assert figures["claims"] == 50
        assert figures["bindings"] >= 50
        for key in ("bindings_per_s", "calls_per_s", "baseline_bindings_per_s",
                    "ratio_to_baseline"):
            assert figures[key] > 0, key
        assert isinstance(figures["meets_target"], bool)
    assert (valid["severity"], valid["failing_bindings"]) == ("pass", 0)
    assert failing["severity"] == "low_confid"
    assert failing["failing_bindings"] == failing["injected_failures"] > 0

    verify = report["verify_bundle"]
    samples = {path.name for path in (ROOT / "samples" / "bundles").glob("*.json")}
    assert set(verify) == samples | {"scaled_50_claims"}
    assert all(figures["bundles_per_s"] > 0 for figures in verify.values())
    assert (verify["scaled_50_claims"]["status"], verify["scaled_50_claims"]["verdict"]) == (
        "SUCCESS", "PASS"
    )


def _bench(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a bench script; its stdout must be exactly one JSON object."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False, env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_bench_smoke__prompt_tokens_on_one_scenario() -> None:
    report = _bench("prompt_tokens.py", "--scenarios", "checkout-pool-exhaustion")
    assert {"benchmark", "estimator", "models", "naive_request", "ratio_formula", "scenarios",
            "max_ratio", "mean_ratio", "target_max_ratio", "meets_target"} <= set(report)
    assert report["benchmark"] == "prompt_tokens"
    assert report["estimator"]["name"] == "fake_anthropic.count_input_tokens"
    sdk = report["estimator"]["anthropic_sdk_count_tokens"]
    assert sdk["used_on_the_real_api"] is False and sdk["reason"]
    assert sdk["agree_with_the_estimator"] is True and sdk["sdk_calls_to_the_fake"] == 4
    [(name, row)] = report["scenarios"].items()
    assert name == "checkout-pool-exhaustion"
    assert (row["status"], row["same_outcome_as_offline_agents"]) == ("SUCCESS", True)
    for role in ("verifier", "composer"):
        assert 0 < row[f"{role}_payload_tokens"] < row[f"{role}_tokens"]
        assert row[f"{role}_tokens"] < row[f"naive_{role}_tokens"]
        assert row[f"{role}_requests_sent"] == 1
        assert row[f"{role}_payload_blocks"]
    ratio = (row["verifier_tokens"] + row["composer_tokens"]) / (
        row["naive_verifier_tokens"] + row["naive_composer_tokens"])
    assert row["ratio"] == round(ratio, 4)
    assert 0 < row["static_prefix_floor_ratio"] < row["ratio"] < 1
    assert report["max_ratio"] == report["mean_ratio"] == row["ratio"]
    assert report["target_max_ratio"] == 0.25
    assert report["meets_target"] is (row["ratio"] <= 0.25)


def test_bench_smoke__llm_concurrency_default_layout_splits_the_llm_threads() -> None:
    """The README's layout: the llm threads in two processes, two control,tools of 16."""
    sys.path.insert(0, str(ROOT))
    from bench.llm_concurrency import default_workers, worker_groups

    assert worker_groups(default_workers(100)) == [("llm", 50), ("llm", 50), ("control,tools", 16),
                                             ("control,tools", 16)]
    assert worker_groups(default_workers(5))[:2] == [("llm", 3), ("llm", 2)]
    assert worker_groups(default_workers(1))[:2] == [("llm", 1), ("control,tools", 16)]


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.postgres
def test_bench_smoke__llm_concurrency_tiny(redis_url: str, postgres_server_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    env |= {"VERITY_BENCH_REDIS_URL": f"{redis_url.rsplit('/', 1)[0]}/13",
            "VERITY_TEST_POSTGRES_URL": postgres_server_url}
    report = _bench("llm_concurrency.py", "--runs", "4", "--latency", "0.2",
                    "--workers", "llm=3 llm=1 control,tools=2", "--single", "1",
                    "--timeout", "120", env=env)
    assert {"benchmark", "worker", "fake_server", "scenario", "runs", "model_calls_per_run",
            "serial_model_latency_s", "single_run_latency_s", "ideal_runs_per_s",
            "ideal_formula", "achieved_runs_per_s", "efficiency", "target_efficiency",
            "meets_target", "batch", "statuses", "all_statuses",
            "worker_peak_rss_mb", "gaps_between_model_calls_ms"} <= set(report)
    assert report["worker"]["concurrency"] == 4 and report["runs"] == 4  # llm threads
    assert report["worker"]["processes"] == [{"queues": "llm", "threads": 3},
                                             {"queues": "llm", "threads": 1},
                                             {"queues": "control,tools", "threads": 2}]
    assert report["fake_server"]["latency_s"] == 0.2
    assert report["all_statuses"] == ["SUCCESS"] * 4 and report["statuses"] == {"SUCCESS": 4}
    calls = report["model_calls_per_run"]
    assert calls["min"] == calls["max"] >= 4  # planner, executor turns, verifier, composer
    assert {"planner", "executor", "verifier", "composer"} == set(calls["by_role_mean"])
    assert report["serial_model_latency_s"] == pytest.approx(calls["mean"] * 0.2)
    assert report["single_run_latency_s"]["median"] >= report["serial_model_latency_s"]
    assert report["ideal_runs_per_s"] == pytest.approx(4 / report["serial_model_latency_s"],
                                                       rel=1e-3)
    assert 0 < report["achieved_runs_per_s"] <= report["ideal_runs_per_s"]
    assert report["efficiency"] == pytest.approx(
        report["achieved_runs_per_s"] / report["ideal_runs_per_s"], abs=2e-3)
    assert isinstance(report["meets_target"], bool)
    batch = report["batch"]
    assert batch["model_call_latency_ms"]["min"] >= 200
    per_process = batch["cpu_s"]["per_worker_process"]
    assert len(per_process) == 3 and all(cpu > 0 for cpu in per_process)
    assert batch["cpu_s"]["worker"] == pytest.approx(sum(per_process), abs=0.02)
    assert batch["prefetch_limit"] == [3, 1, 2]
    # the services on this host worked for the batch too, and the machine was busy
    assert batch["cpu_s"]["postgresql"] > 0 and batch["cpu_s"]["redis"] > 0
    assert 0 < batch["machine_cores_busy"] <= report["cpu_count"]
    everything = sum(v for k, v in batch["cpu_s"].items() if k != "per_worker_process")
    assert batch["all_cpu_s_per_run"] == pytest.approx(everything / 4, abs=0.01)
    assert batch["cpu_ceiling_efficiency"] == pytest.approx(
        4 * report["cpu_count"] / everything / report["ideal_runs_per_s"], rel=0.02)
    gaps = report["gaps_between_model_calls_ms"]
    assert {"start->planner", "planner->executor", "executor->verifier",
            "verifier->composer", "composer->end"} <= set(gaps)
    assert all(g["min"] >= -50 for g in gaps.values())  # commit times vs. call starts
    assert report["worker_peak_rss_mb"] > 0
    # the reconciler ran beside the workers (a `verity reconcile` process by default) and
    # had nothing to do; the node leases are on
    reconciler = report["reconciler"]
    assert (reconciler["kind"], reconciler["alive"]) == ("reconcile", True)
    assert reconciler["sweeps"] >= 1 and not any(reconciler["actions"].values())
    assert batch["cpu_s"]["reconciler"] >= 0
    assert report["worker"]["node_lease"]["ttl_s"] > report["worker"]["node_lease"]["renew_s"]
    assert len(report["load_average_1_5_15"]["before_batch"]) == 3
    # the Executor-to-Executor gap, cut where the tool calls show, adds up
    turns = report["executor_to_executor_ms"]
    assert turns["tool_calls_in_turn"]["min"] >= 1
    parts = sum(turns[k]["mean"] for k in ("commit", "tools", "after_tools"))
    assert parts == pytest.approx(turns["total"]["mean"], abs=1)
    assert gaps["executor->executor"]["p50"] == turns["total"]["p50"]
    # the llm threads' time: the ideal's elapsed plus what each loss added
    threads = report["llm_threads"]
    assert threads["model_calls"] == 4 * calls["mean"]
    assert 0 < threads["utilization"] <= 1
    assert threads["ideal_elapsed_s"] + sum(threads["elapsed_added_s"].values()) == (
        pytest.approx(threads["batch_elapsed_s"], abs=0.1))


def test_bench_smoke__chaos_one_small_drill() -> None:
    """bench/chaos.py starts its own Redis and PostgreSQL: one drill of 5 runs, one object."""
    from tests.chaos.services import MissingBinaryError, postgres_bin_dir, redis_binary

    try:
        redis_binary(), postgres_bin_dir()
    except MissingBinaryError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"bench/chaos.py needs its own services: {exc}", pytrace=False)
        pytest.skip(f"bench/chaos.py needs its own services: {exc}")
    report = _bench("chaos.py", "--drills", "node_raises", "--runs", "5")
    assert report["benchmark"] == "chaos" and report["runs_per_drill"] == 5
    [(name, drill)] = report["drills"].items()
    assert name == "node_raises"
    assert {"runs_submitted", "ended_by_status", "stuck_after_drain", "duplicates",
            "drain_time_s"} <= set(drill)
    assert drill["runs_submitted"] == sum(drill["ended_by_status"].values()) == 5
    assert drill["ended_by_status"] == {"SUCCESS": 1, "FAILED": 4}
    assert drill["stuck_after_drain"] == 0 and drill["drain_time_s"] >= 0
    assert drill["duplicates"] == {"finalize": 0, "tool": 0, "attempt": 0}
    assert report["meets_target"] is True and report["every_check_passed"] is True
