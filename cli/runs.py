"""`verity run`, `runs`, `cancel`, `export`, `scenarios`, `worker` and `reconcile`: the runtime
from the command line. `run` reads a shipped scenario (`--scenario`), a scenario folder
(`--scenario-dir`) or a named source (`--source prod --at 2026-12-01T17:00:00Z`).

The commands that touch runs act as one tenant: `--tenant`, else VERITY_TENANT, else `default`
(so the embedded CLI works with no setup). They see only that tenant's runs and sessions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from cli.render import print_result
from models.bundle import RunResult
from models.run import DEFAULT_TENANT, RunEvent, RunRecord
from pipeline.checks import result_of
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.errors import (
    BatchNotFoundError,
    ConfigurationError,
    InputError,
    RunNotFoundError,
    StoreUnavailableError,
    VerityError,
)
from pipeline.factory import build_runtime, resolve_scenario
from pipeline.ids import check_tenant_id
from pipeline.importers.evaluations import evaluation_events
from pipeline.importers.messages_export import anthropic_transcript
from pipeline.importers.report import check_report
from pipeline.run.graph import WORKER_QUEUES
from pipeline.run.lease import check_lease_settings
from pipeline.scenarios import default_scenarios_dir, list_scenarios
from pipeline.sources.registry import parse_time, sources
from pipeline.store import open_store

_err = Console(stderr=True)

TenantOption = Annotated[str | None, typer.Option(
    "--tenant", help="Act as this tenant (default VERITY_TENANT, else 'default').")]
"""The `--tenant` option of every command that touches runs."""


def tenant_of(option: str | None) -> str:
    """`--tenant`, else VERITY_TENANT, else `default`; InputError (exit 2) for a bad id."""
    chosen = option if option is not None else VeritySettings().tenant or DEFAULT_TENANT
    return check_tenant_id(chosen)


def client_and_worker(stack: ExitStack, tenant: str) -> Any:
    """A producer client of `tenant`: enqueue to real workers, or run the embedded one
    in-process."""
    from client import VerityClient  # celery only for runtime commands
    from pipeline.config import check_settings
    from tasks.embedded import embedded_worker
    from tasks.services import runtime_from

    settings = VeritySettings()
    check_settings(settings)
    runtime = runtime_from(settings)  # the embedded worker runs what a worker would
    stack.callback(runtime.store.close)
    if not settings.broker_url:
        stack.enter_context(embedded_worker(runtime, join_timeout=0.2))
    return VerityClient(runtime, tenant=tenant)


def run(
    query: Annotated[str, typer.Argument(help="The question, e.g. 'why is checkout-service "
                                               "returning 500s?'")],
    scenario: Annotated[str | None, typer.Option(help="A shipped scenario by name.")] = None,
    scenario_dir: Annotated[str | None, typer.Option(help="A scenario folder.")] = None,
    source: Annotated[str | None, typer.Option(
        help="A source of the sources file (see verity sources), or scenario:NAME.")] = None,
    at: Annotated[str | None, typer.Option(
        help="The time the question is about, ISO 8601 (default now; a scenario's own).")
    ] = None,
    session: Annotated[str | None, typer.Option(
        help="Session id for follow-ups (the tenant's own).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the run.")] = 300.0,
    tenant: TenantOption = None,
) -> None:
    """Diagnose: plan, investigate, gatekeep, verify and compose, node by node."""
    owner = tenant_of(tenant)
    chosen = _chosen_source(source, scenario, scenario_dir)
    moment = parse_time(at) if at is not None else None
    with ExitStack() as stack:
        client = client_and_worker(stack, owner)
        run_id = client.submit(query, session_id=session, source=chosen, at=moment)
        record = _follow(client, run_id, timeout=timeout, quiet=as_json)
        failure = _failure(client, run_id)
    if as_json:
        sys.stdout.write(json.dumps(_as_json(record), ensure_ascii=False) + "\n")
    else:
        _print_record(record)
    if record.status.value == "FAILED":
        raise VerityError(f"run {run_id} failed: {failure}") from None
    if record.status.value not in ("SUCCESS", "FALLBACK"):
        raise typer.Exit(1)


def _chosen_source(source: str | None, scenario: str | None, scenario_dir: str | None
                   ) -> str | None:
    """The source `run` submits: `--source`, or the folder of `--scenario`/`--scenario-dir`;
    None (the sources file's default_source) when none is given and the file names one."""
    if source is not None:
        if scenario or scenario_dir:
            raise InputError("give one of --source, --scenario and --scenario-dir")
        return source
    if scenario or scenario_dir:
        return resolve_scenario(scenario, scenario_dir)
    if sources().config().default_source is None:
        raise InputError("name a scenario with --scenario NAME or --scenario-dir PATH, or a "
                         "source with --source NAME")
    return None


def _follow(client: Any, run_id: str, *, timeout: float, quiet: bool) -> RunRecord:
    seen = 0
    deadline = time.monotonic() + timeout
    status = None if quiet else _err.status(f"run {run_id}: submitted", spinner="dots")
    with status if status is not None else ExitStack():
        while True:
            events: list[RunEvent] = client.events(run_id, after=seen)
            for event in events:
                seen = event.seq
                if status is not None:
                    _err.print(f"[dim]{event.seq:>3}[/dim] {event.node:<9} {event.kind:<12} "
                               f"{_brief(event.payload)}", highlight=False)
                    status.update(f"run {run_id}: {event.node} {event.kind}")
            record: RunRecord = client.get(run_id)
            if record.status.terminal and not client.events(run_id, after=seen):
                return record
            if time.monotonic() > deadline:
                raise ConfigurationError(f"run {run_id} did not finish within {timeout:.0f}s; "
                                         f"see it later with: verity show {run_id}")
            time.sleep(0.05)


def _failure(client: Any, run_id: str) -> str:
    """The error of the run's last `failed` event, for a one-line message."""
    failed = [e for e in client.events(run_id) if e.kind == "failed"]
    if not failed:
        return "no failure recorded"
    return f"{failed[-1].node}: {failed[-1].payload.get('error', 'unknown error')}"


def _brief(payload: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in payload.items() if v not in (None, [], {}, "")]
    return " ".join(parts)[:100]


def _as_json(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "intent": record.intent.value,
        "status": record.status.value,
        "verdict": record.verdict.value if record.verdict else None,
        "fallback_type": record.fallback_type.value if record.fallback_type else None,
        "final_answer": record.final_answer.model_dump(mode="json") if record.final_answer
        else None,
        "self_evaluation": record.self_evaluation.model_dump(mode="json")
        if record.self_evaluation else None,
    }


def _print_record(record: RunRecord) -> None:
    out = Console()
    if record.self_evaluation is None or record.final_answer is None:
        out.print(f"run {record.run_id}: {record.status.value}")
        return
    result = RunResult(
        run_id=record.run_id, status=record.status.value,
        verdict=record.verdict, fallback_type=record.fallback_type,
        final_answer=record.final_answer, self_evaluation=record.self_evaluation,
    )
    print_result(out, result, title=record.query)


def cancel(
    run_id: Annotated[str, typer.Argument(help="A run id, or a re-verification batch id.")],
    tenant: TenantOption = None,
) -> None:
    """Cancel a run (nothing new starts, nothing is released, queued tasks are revoked) or a
    batch (no new item starts)."""
    owner = tenant_of(tenant)
    with ExitStack() as stack:
        from client import VerityClient

        runtime = build_runtime()
        stack.callback(runtime.store.close)
        client = VerityClient(runtime, tenant=owner)
        try:
            cancelled = client.cancel(run_id)
            what = "run"
        except RunNotFoundError:
            try:
                cancelled, what = client.cancel_batch(run_id), "batch"
            except BatchNotFoundError:
                raise RunNotFoundError(run_id) from None
    Console().print(f"{what} {run_id}: {'cancelled' if cancelled else 'already finished'}")


class ExportFormat(StrEnum):
    """What `verity export` prints."""

    BUNDLE = "bundle"
    ANTHROPIC = "anthropic"
    OTEL = "otel"


def export(
    run_id: Annotated[str, typer.Argument(help="A stored run id.")],
    format: Annotated[ExportFormat, typer.Option(
        "--format", help="bundle (what `verity verify` accepts, the default), anthropic "
        "(an Anthropic Messages transcript of the run's tool calls and claims, as "
        "`verity import --format anthropic` reads it) or otel (a stored check of another "
        "agent's answer as OpenTelemetry gen_ai.evaluation.result events, OTLP JSON logs)."
    )] = ExportFormat.BUNDLE,
    tenant: TenantOption = None,
) -> None:
    """Print a stored run as a bundle that `verity verify` accepts, as a Messages transcript,
    or (a check) as evaluation events."""
    owner = tenant_of(tenant)
    runtime = build_runtime()
    try:
        bundle = runtime.store.to_bundle(run_id, tenant_id=owner)
        record = runtime.store.get_run(run_id, tenant_id=owner)
    finally:
        runtime.store.close()
    if format is ExportFormat.OTEL:
        if bundle.imported is None:
            raise InputError(f"run {run_id} is not a check of another agent's answer: "
                             "--format otel exports the verdicts of one")
        report = check_report(bundle, result_of(record))
        events = evaluation_events(report, time_unix_nano=time.time_ns())
        sys.stdout.write(json.dumps(events, ensure_ascii=False) + "\n")
        return
    if format is ExportFormat.ANTHROPIC:
        transcript = anthropic_transcript(bundle)
        sys.stdout.write(json.dumps(transcript, ensure_ascii=False) + "\n")
        return
    sys.stdout.write(bundle.model_dump_json(indent=2) + "\n")


def scenarios(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List the shipped sample incidents."""
    found = list_scenarios(default_scenarios_dir())
    if as_json:
        payload = {"scenarios": [s.model_dump(mode="json") for s in found]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    out = Console()
    for info in found:
        out.print(f"[bold]{info.name}[/bold]  {info.question}", highlight=False)


def worker(
    queues: Annotated[str, typer.Option(help="Queues to consume.")] = "control,llm,tools,batch",
    concurrency: Annotated[int, typer.Option(help="Threads.")] = 8,
    loglevel: Annotated[str, typer.Option(help="Log level.")] = "INFO",
    hostname: Annotated[str | None, typer.Option(
        help="Node name (default verity-<queues>-<pid>@<host>, unique per process).")] = None,
    beat: Annotated[bool, typer.Option(
        "--beat", help="Also send the reconciler's sweep every VERITY_RECONCILE_INTERVAL_S "
        "(Celery beat, embedded); safe on several workers.")] = False,
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve this worker's Prometheus metrics on this port (unauthenticated: bind it "
        "to a private network). Not needed when PROMETHEUS_MULTIPROC_DIR is shared with "
        "`verity serve`, whose /metrics then holds the workers' samples.",
        min=1, max=65535)] = None,
) -> None:
    """Run a Celery worker for VERITY_BROKER_URL (threads pool, task events on)."""
    settings = VeritySettings()
    if not settings.broker_url:
        raise ConfigurationError("set VERITY_BROKER_URL (e.g. redis://127.0.0.1:6379/0)")
    # a redelivered node must find a dead copy's lease expired: checked before connecting
    check_lease_settings(settings)
    names = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = sorted(set(names) - set(WORKER_QUEUES))
    if not names or unknown:
        raise InputError(f"--queues: {', '.join(unknown) or 'none given'}; choose among "
                         f"{', '.join(WORKER_QUEUES)}")
    if concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    from tasks.app import app

    # Several workers on one host (one per queue group) need names of their own for Flower
    # and remote control; Celery's default (celery@<host>) would be shared.
    node = hostname or f"verity-{'-'.join(names)}-{os.getpid()}@%h"
    argv = [
        "worker", "--pool", "threads", "--concurrency", str(concurrency),
        "--queues", ",".join(names), "--hostname", node,
        "--loglevel", loglevel, "--task-events", "--without-gossip", "--without-mingle",
    ]
    if metrics_port is not None:
        from pipeline.telemetry.metrics import serve

        serve(metrics_port)
    with ExitStack() as stack:
        if beat:
            argv += ["--beat", "--schedule", _beat_schedule_file(stack)]
        app.worker_main(argv)


def _beat_schedule_file(stack: ExitStack) -> str:
    """Beat's schedule file, in a directory of this process's own (removed at exit): the
    sweep's schedule is a fixed interval, nothing worth keeping across restarts, and workers
    sharing one file would contend for its lock."""
    from tasks.reconcile import use_threaded_beat

    use_threaded_beat()
    folder = tempfile.mkdtemp(prefix="verity-beat-")
    stack.callback(shutil.rmtree, folder, ignore_errors=True)
    return str(Path(folder) / "schedule")


def reconcile(
    once: Annotated[bool, typer.Option("--once", help="One sweep, then exit.")] = False,
    interval: Annotated[float | None, typer.Option(
        help="Seconds between sweeps (default VERITY_RECONCILE_INTERVAL_S).")] = None,
) -> None:
    """Run the reconciler as a service: re-send stalled runs' next steps over
    VERITY_BROKER_URL, end runs past their deadline FAILED. Safe with several running; each
    sweep prints one JSON line of counts."""
    from pipeline.config import check_settings

    settings = VeritySettings()
    if not settings.broker_url:
        raise ConfigurationError("set VERITY_BROKER_URL: the reconciler re-sends over the "
                                 "workers' broker (e.g. redis://127.0.0.1:6379/0)")
    check_settings(settings)
    every = settings.reconcile_interval_s if interval is None else interval
    if every <= 0:
        raise InputError("--interval must be above 0")
    from tasks.reconcile import run_sweep  # celery only once the settings are known good

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open_store(resolve_database_url(settings),
                       run_deadline_s=settings.run_deadline_s) as store:
        while True:
            try:
                counts: dict[str, Any] = run_sweep(store, settings).as_dict()
            except StoreUnavailableError as exc:  # wait the database out, like the workers
                if once:
                    raise
                counts = {"skipped": str(exc)}
            sys.stdout.write(json.dumps(counts) + "\n")
            sys.stdout.flush()
            if once or stop.wait(every):
                return
