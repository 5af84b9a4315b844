"""The end-to-end check of issue 13: a shipped scenario diagnosed through a configured source
(real Prometheus and Alertmanager holding its metrics and alerts, the Loki and Kubernetes
replays serving its logs, events and rollouts, its runbook folder) ends as it does through
its folder: same status, same effective verdict, same root cause, the same claims over the
same projections, and every claim bound to a projection that names the query it ran.

Runs go through `verity run` in a subprocess, as a user runs them: the embedded worker on a
tmp SQLite for every scenario, and real Celery workers on Redis and PostgreSQL for one.
Agents are offline (`VERITY_PROVIDER=offline`), so the two runs differ only in their source.

One difference is inherent and allowed: `scope.queries` (the PromQL, LogQL and API paths),
which the folder's in-memory source leaves out. Alertmanager's v2 API lists only alerts that
have not ended, while the folder (and the harness's `ALERTS` history in Prometheus) holds
resolved ones too; these questions' windows hold no resolved alert, so the projections are
compared whole and a mapping difference anywhere would show there. The runbook folder is
searched in process (BM25 over its Markdown files), not queried on a server: its projection's
scope names the search text (`filter`) and has no backend query to record.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from pipeline.scenarios import load_scenario, scenario_path
from tests.conftest import start_cli, stop_processes
from tests.sources.fault_server import FAULT_TOKEN, FAULT_TOKEN_ENV
from tests.sources.prom_harness import SCENARIOS, PromStack
from tests.sources.replay import KubernetesReplay, LokiReplay

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
QUERY_PREFIX: dict[str, str | tuple[str, ...]] = {
    "search_logs": "GET /loki/api/v1/query",
    # the service's metric names (and labels) in the window, then the range queries
    "query_metrics": ("GET /api/v1/query_range?query=", "GET /api/v1/label/__name__/values?",
                      "GET /api/v1/labels?"),
    # the window's history from Prometheus's ALERTS (and its alert summaries), what fires
    # now from Alertmanager
    "list_alerts": ('GET /api/v1/query_range?query={__name__="ALERTS"', "GET /api/v1/alerts",
                    "GET /api/v1/rules", "GET /api/v2/alerts",
                    # no alert under the configured label: how else the service is labelled
                    "GET /api/v1/label/", "GET /api/v1/labels?"),
    "list_deployments": "GET /apis/apps/v1/namespaces/shop/",
    "get_events": "GET /api/v1/namespaces/shop/events",
}
"""What each tool's recorded queries start with on this source (Loki, Prometheus,
Alertmanager, the Kubernetes API)."""


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers, lists of strings: JSON is TOML here


def sources_file(path: Path, tables: dict[str, dict[str, Any]]) -> Path:
    """A sources file: one `[sources.NAME]` per entry, each backend an inline table."""
    lines = []
    for name, backends in tables.items():
        lines.append(f"[sources.{name}]")
        lines += [f"{kind} = {_toml(table)}" for kind, table in backends.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def backends(stack: PromStack, name: str, loki: str, kube: str) -> dict[str, Any]:
    """Backends for scenario `name`, selectors matching how the harness and replays label it:
    Prometheus series and Alertmanager alerts carry `service`, Loki streams `app` (the
    default), Kubernetes objects live in namespace `shop` labelled `app=<service>` (the
    default selector) with the author in the replay's annotation."""
    prometheus = stack.prometheus_config()
    return {
        "prometheus": {"url": prometheus.url, "service_label": "service",
                       "service_selector": 'service="{service}"', "step_s": prometheus.step_s,
                       "units": prometheus.units},
        "alertmanager": {"url": stack.alertmanager_config(name).url},
        "loki": {"url": loki},
        "kubernetes": {"url": kube, "namespaces": ["shop"],
                       "author_annotation": KubernetesReplay.author_annotation},
        "runbooks": {"path": str(scenario_path(name) / "runbooks")},
    }


def _verity(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def diagnose(env: dict[str, str], question: str, *where: str) -> tuple[dict[str, Any],
                                                                       dict[str, Any]]:
    """`verity run ... --json` and the run's exported bundle (its invocations and the
    Executor's raw output, where the claims' bindings are)."""
    result = json.loads(_verity("run", question, *where, "--json", env=env))
    bundle = json.loads(_verity("export", result["run_id"], env=env))
    return result, bundle


def _env(tmp: Path, config: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    return {**clean, "VERITY_CONFIG": str(config), "VERITY_PROVIDER": "offline",
            "VERITY_HOME": str(tmp / "home"),
            "VERITY_DATABASE_URL": f"sqlite:///{tmp / 'runs.db'}", **extra}


@contextmanager
def replays(name: str) -> Iterator[tuple[str, str]]:
    """The Loki and Kubernetes replays of scenario `name`: their URLs."""
    with LokiReplay(scenario_path(name)) as loki, KubernetesReplay(scenario_path(name)) as kube:
        yield loki.url, kube.url


def claims(bundle: dict[str, Any]) -> list[dict[str, Any]]:
    """The Executor's claims, with their evidence bindings."""
    raw: list[dict[str, Any]] = json.loads(bundle["executor_output_raw"])["claims"]
    return raw


def comparable(bundle: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The claims and invocations, call ids (minted per run) replaced by the call's position
    and `scope.queries` left out."""
    position = {i["tool_call_id"]: n for n, i in enumerate(bundle["invocations"])}
    out_claims = [{**c, "evidence_bindings": [
        {**b, "invocation_id": position[b["invocation_id"]]}
        for b in c.get("evidence_bindings", [])]} for c in claims(bundle)]
    calls = []
    for invocation in bundle["invocations"]:
        projection = dict(invocation["projection"] or {})
        projection["scope"] = {k: v for k, v in projection.get("scope", {}).items()
                               if k != "queries"}
        calls.append({**{k: v for k, v in invocation.items() if k != "tool_call_id"},
                      "projection": projection})
    return out_claims, calls


def assert_same_diagnosis(name: str, through: tuple[dict[str, Any], dict[str, Any]],
                          folder: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Same status, effective verdict, root cause, claims and projections (see the module
    docstring for what may differ), every binding naming the query it ran."""
    (run, bundle), (folder_run, folder_bundle) = through, folder
    verdict = run["self_evaluation"]["verifier_evaluation"]["effective_verdict"]
    folder_verdict = folder_run["self_evaluation"]["verifier_evaluation"]["effective_verdict"]
    meta = load_scenario(scenario_path(name)).meta
    assert (run["status"], verdict) == (folder_run["status"], folder_verdict)
    assert run["status"] == meta.expected.status and verdict in meta.expected.verdicts
    root = [c["text"] for c in claims(bundle) if c["kind"] == "ROOT_CAUSE"]
    assert root and root == [c["text"] for c in claims(folder_bundle) if c["kind"] == "ROOT_CAUSE"]
    assert meta.root_cause is not None
    for term in meta.root_cause.must_mention:
        assert term in root[0] and term in run["final_answer"]["answer_summary"], term
    assert run["final_answer"] == folder_run["final_answer"]
    mine, theirs = comparable(bundle), comparable(folder_bundle)
    assert mine[0] == theirs[0]  # the claims
    assert mine[1] == theirs[1]  # the invocations and their projections
    assert_bindings_name_their_queries(bundle)


def assert_bindings_name_their_queries(bundle: dict[str, Any]) -> None:
    by_id = {i["tool_call_id"]: i for i in bundle["invocations"]}
    bound = {b["invocation_id"] for c in claims(bundle) for b in c.get("evidence_bindings", [])}
    assert bound
    for call_id in bound:
        invocation = by_id[call_id]
        tool, scope = invocation["tool_name"], invocation["projection"]["scope"]
        if tool == "search_runbooks":  # searched in process: the text is the whole query
            assert scope["filter"] and "queries" not in scope
            continue
        assert scope["queries"], call_id
        assert all(q.startswith(QUERY_PREFIX[tool]) for q in scope["queries"]), scope["queries"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_end_to_end__a_configured_source_diagnoses_as_the_folder_does(
        prom_stack: PromStack, tmp_path: Path, name: str) -> None:
    meta = load_scenario(scenario_path(name)).meta
    assert meta.question is not None
    with replays(name) as (loki, kube):
        config = sources_file(tmp_path / "config.toml",
                              {"prod": backends(prom_stack, name, loki, kube)})
        env = _env(tmp_path, config)
        through = diagnose(env, meta.question, "--source", "prod", "--at", meta.now.isoformat())
    folder = diagnose(env, meta.question, "--scenario", name)
    assert_same_diagnosis(name, through, folder)


@contextmanager
def celery_worker(env: dict[str, str], log: Path) -> Iterator[None]:
    """`verity worker` on every queue, as tests/integration starts it; stopped warm after."""
    process = start_cli(["worker", "--concurrency", "2", "--queues", "control,llm,tools",
                         "--loglevel", "INFO"], env=env, log=log, ready=b"ready.",
                        what="worker")
    try:
        yield
    finally:
        stop_processes([process])


def test_end_to_end__through_celery_workers_on_redis_and_postgresql(
        prom_stack: PromStack, tmp_path: Path, postgres_url: str, redis_url: str) -> None:
    name = "inventory-oom-crashloop"
    meta = load_scenario(scenario_path(name)).meta
    assert meta.question is not None
    redis_db = f"{redis_url.rsplit('/', 1)[0]}/{random.randint(1, 12)}"  # as tests/integration
    broker = redis.Redis.from_url(redis_db)
    broker.flushdb()
    with ExitStack() as stack:
        stack.callback(broker.close)
        stack.callback(broker.flushdb)
        loki, kube = stack.enter_context(replays(name))
        config = sources_file(tmp_path / "config.toml",
                              {"prod": backends(prom_stack, name, loki, kube)})
        env = _env(tmp_path, config, VERITY_BROKER_URL=redis_db, VERITY_RESULT_BACKEND=redis_db,
                   VERITY_DATABASE_URL=postgres_url)
        stack.enter_context(celery_worker(env, tmp_path / "worker.log"))
        through = diagnose(env, meta.question, "--source", "prod", "--at", meta.now.isoformat())
        folder = diagnose(env, meta.question, "--scenario", name)
    assert through[0]["run_id"] != folder[0]["run_id"]
    assert_same_diagnosis(name, through, folder)


def test_end_to_end__a_dead_loki_and_a_refusing_prometheus_are_error_invocations(
        prom_stack: PromStack, tmp_path: Path, fault_server: str, closed_port: int) -> None:
    name = "checkout-pool-exhaustion"
    meta = load_scenario(scenario_path(name)).meta
    assert meta.question is not None
    with replays(name) as (loki, kube):
        good = backends(prom_stack, name, loki, kube)
        config = sources_file(tmp_path / "config.toml", {
            "loki-down": {**good, "loki": {"url": f"http://127.0.0.1:{closed_port}"}},
            "prom-401": {**good, "prometheus": {
                **good["prometheus"], "url": f"{fault_server}/401",
                "auth": {"type": "bearer", "token_env": FAULT_TOKEN_ENV}}},
        })
        env = _env(tmp_path, config, **{FAULT_TOKEN_ENV: FAULT_TOKEN})
        runs = {source: diagnose(env, meta.question, "--source", source, "--at",
                                 meta.now.isoformat())
                for source in ("loki-down", "prom-401")}
    for source, tool, reason in [
        ("loki-down", "search_logs", "BackendUnreachableError: loki-down/loki unreachable: "),
        ("prom-401", "query_metrics",
         "BackendAuthError: prom-401/prometheus refused the credentials (HTTP 401)"),
    ]:
        run, bundle = runs[source]
        assert run["status"] in ("SUCCESS", "FALLBACK"), source
        calls = [i for i in bundle["invocations"] if i["tool_name"] == tool]
        assert calls, f"{source}: no {tool} call"
        for call in calls:
            assert (call["status"], call["evidence_status"]) == ("ERROR", "ERROR")
            assert call["error"].startswith(reason), call["error"]
            assert "\n" not in call["error"]
        assert FAULT_TOKEN not in json.dumps(bundle) + json.dumps(run)
