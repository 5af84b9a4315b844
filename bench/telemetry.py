"""What Verity's own telemetry costs one run, measured in-process where other load on the host
moves it least: the hooks a run calls (submit, one timed node message per node, a tool span per
tool call, a model attempt per model call, the end), timed over many runs with tracing off
(metrics only) and on (spans through a batch processor to the real OTLP/HTTP exporter, posting
to a sink in a child process). Prints one JSON object; divide by `bench/runtime.py`'s per-run
latency for the share of a run.

With tracing on, the timed span includes exporting every span: the processor is flushed every
`FLUSH_EVERY` runs (so its queue never fills and drops spans) and the figures are both the
wall time and the CPU time of every thread of this process (`process_time`, which counts the
export thread's encoding and posting). The sink counts the spans it decodes.

    python bench/telemetry.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NODES = ("plan", "execute", "execute", "gatekeep", "verify", "compose", "finalize")
TOOLS = 3
MODEL_CALLS = 4
SPANS_PER_RUN = len(NODES) + TOOLS + MODEL_CALLS + 1
FLUSH_EVERY = 100
"""Runs between flushes: 100 runs' spans stay below the batch processor's queue (2048)."""


def one_run() -> None:
    """The hooks of one run, in the order the runtime calls them."""
    from models.run import LlmAttempt
    from pipeline import telemetry

    run_id = uuid.uuid4().hex
    state = telemetry.new_run_telemetry()
    telemetry.trace_id(run_id)
    telemetry.run_submitted(intent="DIAGNOSIS", tenant_id="bench")
    for i in range(TOOLS):
        with telemetry.tool_call(run_id, tool_name="search_logs", tool_call_id=f"toolu_{i}"):
            pass
    attempt = LlmAttempt(run_id=run_id, role="verifier", attempt_number=1, prompt_name="v",
                         prompt_version="1", input_sha256="d", model="bench-model",
                         latency_ms=1.0, input_tokens=100, output_tokens=10, outcome="ok")
    calls = 0
    for node in NODES:
        with telemetry.node(run_id, node) as watch:
            if calls < MODEL_CALLS and node in ("plan", "execute", "verify", "compose"):
                telemetry.model_call(attempt, provider="anthropic",
                                     started_ns=time.time_ns() - 1_000_000)
                calls += 1
            watch.outcome = "committed"
    telemetry.run_ended(status="SUCCESS", verdict="PASS", intent="DIAGNOSIS",
                        tenant_id="bench", telemetry=state, run_id=run_id)


def measure(rounds: int) -> dict[str, float]:
    """Five samples of `rounds` runs each, exported before each sample ends: the median and
    the minimum of the wall and CPU time a run took."""
    from pipeline.telemetry import tracing

    walls, cpus = [], []
    for _ in range(5):
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(1, rounds + 1):
            one_run()
            if i % FLUSH_EVERY == 0:
                tracing.flush()
        tracing.flush()
        walls.append((time.perf_counter() - wall) / rounds)
        cpus.append((time.process_time() - cpu) / rounds)
    return {"per_run_us_median": round(statistics.median(walls) * 1e6, 1),
            "per_run_us_min": round(min(walls) * 1e6, 1),
            "per_run_cpu_us_median": round(statistics.median(cpus) * 1e6, 1)}


def span_sink(pipe: Any) -> None:
    """A child process: an OTLP/HTTP endpoint that decodes each export and counts its spans
    (its own CPU is not this process's)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from bench.services import serve_exports

    counts = {"requests": 0, "spans": 0}

    def count(body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        counts["requests"] += 1
        counts["spans"] += sum(len(s.spans) for r in request.resource_spans
                               for s in r.scope_spans)

    pipe.send(serve_exports(count))
    pipe.recv()  # asked for the counts
    pipe.send(dict(counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="runs per sample (5 samples)")
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    from pipeline.telemetry import tracing

    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(name, None)
    off = measure(args.rounds)
    ours, theirs = multiprocessing.Pipe()
    sink = multiprocessing.get_context("spawn").Process(target=span_sink, args=(theirs,),
                                                        daemon=True)
    sink.start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = ours.recv()
    tracing.use_processor(None)
    on = measure(args.rounds)
    ours.send("counts")
    received = ours.recv()
    print(json.dumps({
        "benchmark": "telemetry", "python": sys.version.split()[0],
        "per_run": {"nodes": len(NODES), "tool_calls": TOOLS, "model_calls": MODEL_CALLS,
                    "spans": SPANS_PER_RUN},
        "tracing_off_metrics_only": off, "tracing_on": on,
        "otlp_requests_received": received["requests"],
        "spans_received": received["spans"], "spans_expected": 5 * args.rounds * SPANS_PER_RUN,
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }, indent=2))
    sys.stdout.flush()
    os._exit(0)  # the batch processor's thread: nothing left to wait for


if __name__ == "__main__":
    main()
