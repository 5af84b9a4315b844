"""HTTP API benchmark: `POST /runs` against the producer API it wraps, and SSE delivery delay.

(Named http_api.py: a `bench/http.py` shadows the standard library's `http` for every script
run from this folder, `bench/sources.py` included.)

On the local PostgreSQL and Redis, with real `verity worker` processes and Claude agents on the
fake Anthropic server (tests/chaos/harness.py), it measures, and prints as one JSON object:
- `POST /runs` latency (p50, p95) and runs/s over a kept-alive HTTP connection, with a lean
  client (`http.client`) and with httpx, beside `VerityClient.submit` called in this process
  on the same database and broker, interleaved call by call (the target: HTTP at most 1.5x
  direct at p50); then each from 8 threads at once;
- SSE delivery delay with 200 followers of one run: for every run_event a follower receives,
  its arrival time minus the event's `created_at` (the store's write time), p50 and p99.

    python bench/http_api.py [--runs 40] [--followers 200] [--latency 0.25]
"""

# ruff: noqa: E402 - the path is fixed before the imports
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG = os.environ.get("VERITY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("VERITY_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")
SOURCE = "scenario:checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"
THREADS = 8


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="POSTs per side, sequential")
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.25,
                        help="seconds the fake holds each model call during the SSE run")
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    import redis
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    schema = f"verity_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG, poolclass=NullPool)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    db_url = make_url(PG).update_query_dict({"options": f"-csearch_path={schema}"}
                                            ).render_as_string(hide_password=False)
    broker = redis.Redis.from_url(REDIS)
    broker.flushdb()
    try:
        report = _bench(args, db_url)
    finally:
        broker.flushdb()
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    print(json.dumps(report, indent=2))


def _bench(args: argparse.Namespace, db_url: str) -> dict[str, Any]:
    from tests.api.conftest import free_port
    from tests.chaos.harness import spawn_fake

    fake = spawn_fake()
    home = Path(tempfile.mkdtemp(prefix="verity-bench-http-"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VERITY_", "ANTHROPIC_"))}
    env = {**clean, "PYTHONPATH": str(ROOT), "VERITY_BROKER_URL": REDIS,
           "VERITY_RESULT_BACKEND": REDIS, "VERITY_DATABASE_URL": db_url,
           "VERITY_HOME": str(home), "VERITY_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "bench",
           "ANTHROPIC_BASE_URL": fake.base_url, "VERITY_API_RUNS_PER_MINUTE": "1000000"}
    os.environ.update({k: v for k, v in env.items() if k.startswith(("VERITY_", "ANTHROPIC_"))})
    port = free_port()
    processes = [
        _start(env, home / "llm.log", "worker", "--queues", "llm", "--concurrency", "8",
               ready=b"ready."),
        _start(env, home / "rest.log", "worker", "--queues", "control,tools,batch",
               "--concurrency", "4", ready=b"ready."),
        _start(env, home / "serve.log", "serve", "--port", str(port), ready=b"Verity on http"),
    ]
    try:
        base = f"http://127.0.0.1:{port}"
        secret = _token(db_url)
        post = _post_runs(base, secret, runs=args.runs)
        _drain(db_url)
        fake.set_latency(args.latency)
        sse = asyncio.run(_sse(base, secret, followers=args.followers))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(20)
        fake.stop()
    return {"post_runs": post, "sse": sse,
            "setup": {"database": "postgresql", "broker": "redis", "workers":
                      "llm x8 threads, control/tools/batch x4", "agents": "claude on the fake "
                      "Anthropic server", "server": "verity serve (uvicorn, 1 process)",
                      "sse_poll_s": 0.1, "model_latency_s_during_sse": args.latency}}


def _start(env: dict[str, str], log_file: Path, *args: str, ready: bytes) -> Any:
    with log_file.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while ready not in log_file.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{args[0]} did not start: {log_file.read_text()[-2000:]}")
        time.sleep(0.1)
    return process


def _token(db_url: str) -> str:
    from pipeline.store import open_store
    from pipeline.tokens import hash_secret, new_secret, new_token_id

    secret = new_secret()
    with open_store(db_url) as store:
        store.create_token(token_id=new_token_id(), tenant_id="bench", name="bench",
                           secret_sha256=hash_secret(secret))
    return secret


def _stats(samples: list[float], elapsed: float) -> dict[str, Any]:
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": round(_pct(ordered, 50) * 1000, 2),
            "p95_ms": round(_pct(ordered, 95) * 1000, 2),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
            "runs_per_s": round(len(ordered) / elapsed, 1)}


def _pct(ordered: list[float], pct: float) -> float:
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _post_runs(base: str, secret: str, *, runs: int) -> dict[str, Any]:
    """`POST /runs` three ways, interleaved call by call: over HTTP with a lean client (the
    standard library's keep-alive `http.client`: the API's own latency, as a load generator
    sees it), over HTTP with httpx (what a Python caller of `VerityClient.from_url` also pays
    for its client), and `VerityClient.submit` in this process."""
    import http.client
    from urllib.parse import urlsplit

    import httpx

    from api.sources import source_name
    from client import VerityClient

    direct = VerityClient.from_env(tenant="bench")
    local = threading.local()
    address = urlsplit(base)
    body = json.dumps({"question": QUESTION, "source": SOURCE})
    headers = {"authorization": f"Bearer {secret}", "content-type": "application/json"}

    def over_http() -> None:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(
                address.hostname, address.port, timeout=30)
        connection.request("POST", "/runs", body, headers)
        answer = connection.getresponse()
        text = answer.read()
        assert answer.status == 202, text

    def over_httpx() -> None:
        client = getattr(local, "httpx", None)
        if client is None:
            client = local.httpx = httpx.Client(base_url=base, timeout=30, headers=headers)
        answer = client.post("/runs", content=body)
        assert answer.status_code == 202, answer.text

    def in_process() -> None:
        # what the endpoint does: name the source, then submit
        direct.submit(QUESTION, source=source_name(SOURCE))

    sides = {"http": over_http, "http_httpx": over_httpx, "direct": in_process}
    for call in [*sides.values()] * 2:  # warm every path
        call()
    timed: dict[str, list[float]] = {name: [] for name in sides}
    spent = dict.fromkeys(sides, 0.0)
    for _ in range(runs):
        for name, call in sides.items():
            started = time.perf_counter()
            call()
            took = time.perf_counter() - started
            timed[name].append(took)
            spent[name] += took
    found: dict[str, Any] = {name: _stats(timed[name], spent[name]) for name in timed}
    found["ratio_p50"] = round(found["http"]["p50_ms"] / found["direct"]["p50_ms"], 2)
    found["ratio_p50_httpx"] = round(found["http_httpx"]["p50_ms"] / found["direct"]["p50_ms"],
                                     2)
    found["target_ratio_p50"] = 1.5
    found["clients"] = {"http": "http.client (standard library), one kept-alive connection",
                        "http_httpx": "httpx.Client, one kept-alive connection"}
    found["concurrent"] = {"threads": THREADS}
    for name, call in sides.items():
        started = time.perf_counter()
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda _, chosen=call: chosen(), range(runs)))
        found["concurrent"][f"{name}_runs_per_s"] = round(runs / (time.perf_counter() - started),
                                                          1)
    log(f"POST /runs: {json.dumps(found)}")
    return found


def _drain(db_url: str, *, timeout: float = 300) -> None:
    """Wait for the runs the POSTs created to end, so the SSE run has the workers to itself."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(db_url, poolclass=NullPool)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with engine.connect() as connection:
                left = connection.execute(text(
                    "SELECT count(*) FROM diagnosis_run WHERE status IN ('PENDING', 'RUNNING')"
                )).scalar_one()
            if not left or time.monotonic() > deadline:
                log(f"drained ({left} runs left)")
                return
            time.sleep(1)
    finally:
        engine.dispose()


async def _sse(base: str, secret: str, *, followers: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=followers + 20)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits,
                                 headers={"authorization": f"Bearer {secret}"}) as http:
        created = await http.post("/runs", json={"question": QUESTION, "source": SOURCE})
        run_id = created.json()["run_id"]
        results = await asyncio.gather(*(_follow(http, run_id) for _ in range(followers)))
    delays = sorted(d for _, got in results for d in got)
    events = max((n for n, _ in results), default=0)
    complete = sum(1 for n, _ in results if n == events)
    found = {"followers": followers, "run_events": events, "followers_with_every_event":
             complete, "samples": len(delays),
             "delay_ms": {"p50": round(_pct(delays, 50) * 1000, 1),
                          "p99": round(_pct(delays, 99) * 1000, 1),
                          "max": round(delays[-1] * 1000, 1)} if delays else None}
    log(f"SSE: {json.dumps(found)}")
    return found


async def _follow(http: Any, run_id: str) -> tuple[int, list[float]]:
    """Events received, and the delay of each written after this follower was connected."""
    delays: list[float] = []
    received = 0
    async with http.stream("GET", f"/runs/{run_id}/events") as response:
        connected = time.time()
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "run_event":
                arrived = time.time()
                received += 1
                written = datetime.fromisoformat(json.loads(line[6:])["created_at"]).timestamp()
                if written >= connected:
                    delays.append(arrived - written)
            elif line.startswith("data: ") and event == "end":
                break
    return received, delays


if __name__ == "__main__":
    main()
