"""What Verity's own telemetry costs one run, measured in-process where other load on the host
moves it least: the hooks a run calls (submit, one timed node message per node, a tool span per
tool call, a model attempt per model call, the end), timed over many rounds with tracing off
(metrics only) and on (spans through a batch processor to the real OTLP/HTTP exporter, posting
to a local sink). Prints one JSON object; divide by `bench/runtime.py`'s per-run latency for the
share of a run.

    python bench/telemetry.py [--rounds 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.runtime import TraceSink  # noqa: E402

NODES = ("plan", "execute", "execute", "gatekeep", "verify", "compose", "finalize")
TOOLS = 3
MODEL_CALLS = 4


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
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            one_run()
        samples.append((time.perf_counter() - start) / rounds)
    return {"per_run_us_median": round(statistics.median(samples) * 1e6, 1),
            "per_run_us_min": round(min(samples) * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    from pipeline.telemetry import tracing

    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        os.environ.pop(name, None)
    off = measure(args.rounds)
    sink = TraceSink()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.url
    tracing.use_processor(None)
    on = measure(args.rounds)
    tracing.flush()
    print(json.dumps({
        "benchmark": "telemetry", "python": sys.version.split()[0],
        "per_run": {"nodes": len(NODES), "tool_calls": TOOLS, "model_calls": MODEL_CALLS},
        "tracing_off_metrics_only": off, "tracing_on": on,
        "otlp_requests_received": sink.requests,
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }, indent=2))
    sys.stdout.flush()
    os._exit(0)  # the batch processor's thread: nothing left to wait for


if __name__ == "__main__":
    main()
