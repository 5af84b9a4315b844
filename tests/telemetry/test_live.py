"""Verity's own metrics and traces from real processes: `verity serve` and a `verity worker`
on real Redis and PostgreSQL share one PROMETHEUS_MULTIPROC_DIR, the real Prometheus scrapes
the API's `/metrics` (with an API token) every second, and both export spans to a local
OTLP/HTTP receiver. Offline runs go in through `POST /runs`; Prometheus then answers them by
status and verdict, the workers' node timings included, and each run is one trace."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pipeline.store import open_store
from pipeline.telemetry.tracing import run_ids
from pipeline.tokens import hash_secret, new_secret, new_token_id
from tests.api.conftest import free_port, wait_for_run
from tests.conftest import fresh_schema, own_redis_db, start_cli, stop_processes
from tests.telemetry.otlp_receiver import OtlpReceiver

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.prometheus,
              pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TENANT = "team-a"
RUNS = 3
SOURCE = "checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"


@dataclass
class Live:
    api: str
    prometheus: str
    secret: str
    receiver: OtlpReceiver
    run_ids: list[str]


def _token(database_url: str) -> str:
    secret = new_secret()
    with open_store(database_url) as store:
        store.create_token(token_id=new_token_id(), tenant_id=TENANT, name="test",
                           secret_sha256=hash_secret(secret))
    return secret


def _prometheus(api_port: int, secret: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("prometheus")
    if binary is None:
        message = "prometheus is not installed (scripts/ensure_prometheus.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: verity\n"
        "    authorization: {type: Bearer, credentials: '" + secret + "'}\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{api_port}']}}]\n")
    port = free_port()
    with (folder / "prometheus.log").open("wb") as log:  # the child keeps its own copy
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, \
            (folder / "prometheus.log").read_text()[-2000:]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def live(postgres_server_url: str, redis_url: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("telemetry")
    metrics_dir = folder / "metrics"
    metrics_dir.mkdir()  # empty before any process starts
    with fresh_schema(postgres_server_url, "verity_obs") as database_url, \
            own_redis_db(redis_url) as redis_db, OtlpReceiver() as receiver:
        open_store(database_url).close()
        secret = _token(database_url)
        port = free_port()
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VERITY_", "ANTHROPIC_", "OTEL_"))}
        env = {
            **clean,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), clean.get("PYTHONPATH")])),
            "VERITY_BROKER_URL": redis_db, "VERITY_RESULT_BACKEND": redis_db,
            "VERITY_DATABASE_URL": database_url, "VERITY_HOME": str(folder / "home"),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "200",
            "VERITY_TRACE_URL": "https://tempo.example/trace/{trace_id}",
        }
        processes = []
        prometheus = None
        try:
            processes.append(start_cli(
                ["worker", "--concurrency", "4", "--queues", "control,llm,tools"], env=env,
                ready=b"ready.", what="worker", log=folder / "worker.log"))
            processes.append(start_cli(["serve", "--port", str(port)], env=env,
                                       ready=b"Verity on http", what="serve",
                                       log=folder / "serve.log"))
            prometheus, prometheus_url = _prometheus(port, secret, folder)
            api = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=api, timeout=30,
                              headers={"authorization": f"Bearer {secret}"}) as http:
                made = [http.post("/runs", json={"question": QUESTION, "source": SOURCE})
                        for _ in range(RUNS)]
                assert all(r.status_code == 202 for r in made), [r.text for r in made]
                run_ids = [r.json()["run_id"] for r in made]
                for run_id in run_ids:
                    wait_for_run(http, run_id, timeout=120)
            yield Live(api=api, prometheus=prometheus_url, secret=secret, receiver=receiver,
                       run_ids=run_ids)
        finally:
            if prometheus is not None:
                prometheus.terminate()
                prometheus.wait(10)
            stop_processes(processes)


def query(live: Live, promql: str, *, until: Any, timeout: float = 30.0) -> list[Any]:
    """`/api/v1/query` of `promql`, asked again until `until(result)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        body = httpx.get(f"{live.prometheus}/api/v1/query", params={"query": promql},
                         timeout=5).json()
        assert body["status"] == "success", body
        result: list[Any] = body["data"]["result"]
        if until(result):
            return result
        assert time.monotonic() < deadline, f"{promql}: {result}"
        time.sleep(0.5)


def test_prometheus__answers_the_runs_by_status_and_verdict(live: Live) -> None:
    ended = query(live, "sum by (status, verdict) (verity_runs_ended_total)",
                  until=lambda r: sum(float(s["value"][1]) for s in r) >= RUNS)
    assert {(s["metric"]["status"], s["metric"]["verdict"]): float(s["value"][1])
            for s in ended} == {("SUCCESS", "PASS"): RUNS}
    submitted = query(live, "sum(verity_runs_submitted_total)", until=bool)
    assert float(submitted[0]["value"][1]) == RUNS
    # nodes run only in the worker: its samples reach the API's page through the shared dir
    nodes = query(live, 'sum by (node) (verity_node_duration_seconds_count{outcome="committed"})',
                  until=lambda r: len(r) >= 5)
    assert {"plan", "execute", "gatekeep", "verify", "compose", "finalize"} <= {
        s["metric"]["node"] for s in nodes}
    calls = query(live, 'sum by (role) (verity_model_calls_total{outcome="ok"})', until=bool)
    assert {s["metric"]["role"] for s in calls} >= {"verifier", "composer"}
    depths = query(live, "verity_queue_depth", until=bool)
    assert {s["metric"]["queue"] for s in depths} >= {"control", "llm", "tools"}


def test_metrics__asks_for_a_token(live: Live) -> None:
    assert httpx.get(f"{live.api}/metrics", timeout=10).status_code == 401
    page = httpx.get(f"{live.api}/metrics", timeout=10,
                     headers={"authorization": f"Bearer {live.secret}"})
    assert page.status_code == 200 and "verity_runs_ended_total" in page.text
    assert TENANT not in page.text  # no tenant label unless VERITY_METRICS_TENANTS opts in


def test_each_run__is_one_trace_from_the_worker_linked_from_the_run(live: Live) -> None:
    traces = {run_ids(run_id)[0]: run_id for run_id in live.run_ids}
    spans = live.receiver.wait_for(lambda got: {
        s.trace_id for s in got if s.name == "verity.run"} >= set(traces))
    with httpx.Client(base_url=live.api, timeout=10,
                      headers={"authorization": f"Bearer {live.secret}"}) as http:
        for trace_id, run_id in traces.items():
            record = http.get(f"/runs/{run_id}").json()
            assert record["trace_id"] == trace_id
            assert record["trace_url"] == f"https://tempo.example/trace/{trace_id}"
            mine = [s for s in spans if s.trace_id == trace_id]
            (root,) = [s for s in mine if s.name == "verity.run"]
            nodes = [s for s in mine if s.name.startswith("verity.node ")]
            assert {s.name for s in nodes} >= {
                f"verity.node {n}" for n in ("plan", "execute", "gatekeep", "verify",
                                             "compose", "finalize")}
            assert all(s.parent_span_id == root.span_id for s in nodes)
            chats = [s for s in mine if s.name.startswith("chat ")]
            assert chats and all(s.attributes["gen_ai.operation.name"] == "chat"
                                 and s.attributes["gen_ai.request.model"] for s in chats)
            tools = [s for s in mine if s.name.startswith("execute_tool ")]
            assert tools and all(s.attributes["gen_ai.tool.call.id"] for s in tools)
    assert not {s.trace_id for s in spans} - set(traces)  # no span outside a run's trace
