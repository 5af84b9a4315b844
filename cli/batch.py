"""`verity runs` with its filters, `verity reverify` and `verity reverify-report`: selecting
stored runs and re-judging them in a batch job.

    verity runs --since 7d --verdict PASS                    # what a batch would select
    verity reverify --since 7d --verdict PASS                # re-judge them, with a progress bar
    verity reverify-report BATCH_ID [--json | --csv FILE]    # what changed, and why

The same filters select in both; `--resume BATCH_ID` sends a batch's items left again, and
`verity cancel BATCH_ID` stops one. Without VERITY_BROKER_URL the batch runs on the embedded
worker, in this process.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cli.runs import TenantOption, client_and_worker, tenant_of
from models.batch import BatchRecord, BatchStatus, Selection
from models.common import RunStatus
from models.run import RunRecord
from pipeline.config import VeritySettings, resolve_database_url
from pipeline.errors import ConfigurationError, InputError
from pipeline.store import open_store

_err = Console(stderr=True)
_VERDICTS = ("PASS", "LOW_CONFID", "REJECT", "null")
_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

Since = Annotated[str | None, typer.Option(
    help="Runs created at or after: ISO 8601 (2026-11-30, 2026-11-30T12:00Z) or an age (7d, 12h).")]
Until = Annotated[str | None, typer.Option(help="Runs created before (same forms as --since).")]
Session = Annotated[str | None, typer.Option("--session", help="Only this session's runs.")]
Verdicts = Annotated[list[str] | None, typer.Option(
    "--verdict", help="PASS, LOW_CONFID, REJECT or null; repeat or comma-separate.")]
Statuses = Annotated[list[str] | None, typer.Option(
    "--status", help="SUCCESS, FALLBACK, FAILED, CANCELLED ...; repeat or comma-separate.")]
PromptVersions = Annotated[list[str] | None, typer.Option(
    "--prompt-version", help="ROLE=VERSION the run used (verifier=4); repeatable.")]
Models = Annotated[list[str] | None, typer.Option(
    "--model", help="A model the run used; repeatable.")]
Limit = Annotated[int | None, typer.Option(help="At most this many runs, newest first.")]


def selection_of(
    *, since: str | None, until: str | None, session: str | None, verdicts: list[str] | None,
    statuses: list[str] | None, prompt_versions: list[str] | None, models: list[str] | None,
    limit: int | None,
) -> Selection:
    """The filters as a Selection; InputError (one line, exit 2) for any bad value."""
    if limit is not None and limit < 1:
        raise InputError("--limit must be at least 1")
    chosen = _split(verdicts)
    bad = [v for v in chosen if v not in _VERDICTS]
    if bad:
        raise InputError(f"--verdict {bad[0]!r}: choose among {', '.join(_VERDICTS)}")
    names = _split(statuses)
    known = {s.value for s in RunStatus}
    unknown = [s for s in names if s.upper() not in known]
    if unknown:
        raise InputError(f"--status {unknown[0]!r}: choose among {', '.join(sorted(known))}")
    versions: dict[str, str] = {}
    for pair in prompt_versions or []:
        role, sep, version = pair.partition("=")
        if not sep or not role.strip() or not version.strip():
            raise InputError(f"--prompt-version {pair!r}: write ROLE=VERSION, e.g. verifier=4")
        versions[role.strip()] = version.strip()
    start, end = _moment(since, "--since"), _moment(until, "--until")
    if start is not None and end is not None and start >= end:
        raise InputError("--since must be before --until")
    return Selection(since=start, until=end, session_id=session, verdicts=chosen,
                     statuses=[RunStatus(s.upper()) for s in names], prompt_versions=versions,
                     models=[m for m in models or [] if m.strip()], limit=limit)


def runs(
    since: Since = None, until: Until = None, session: Session = None,
    verdict: Verdicts = None, status: Statuses = None, prompt_version: PromptVersions = None,
    model: Models = None,
    limit: Annotated[int, typer.Option(help="At most this many runs, newest first.")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    tenant: TenantOption = None,
) -> None:
    """List the tenant's stored runs, newest first (the filters of `verity reverify`)."""
    owner = tenant_of(tenant)
    selection = selection_of(since=since, until=until, session=session, verdicts=verdict,
                             statuses=status, prompt_versions=prompt_version, models=model,
                             limit=limit)
    with open_store(resolve_database_url(VeritySettings())) as store:
        found = store.iter_runs(tenant_id=owner, selection=selection, summary=True)
        if as_json:
            payload = {"tenant_id": owner, "runs": [_summary(record) for record in found]}
            sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
            return
        table = Table("run", "created (UTC)", "status", "verdict", "session", "question",
                      box=None, pad_edge=False)
        for record in found:
            table.add_row(record.run_id,
                          record.created_at.strftime("%Y-%m-%d %H:%M:%S")
                          if record.created_at else "-",
                          record.status.value, record.verdict.value if record.verdict else "-",
                          record.session_id or "-", record.query[:60])
    Console().print(table)


def reverify(
    since: Since = None, until: Until = None, session: Session = None,
    verdict: Verdicts = None, status: Statuses = None, prompt_version: PromptVersions = None,
    model: Models = None, limit: Limit = None,
    provider: Annotated[str | None, typer.Option(
        help="offline or anthropic (default: the configured provider).")] = None,
    message_batches: Annotated[bool, typer.Option(
        "--message-batches", help="With anthropic: send the Verifier's and Composer's requests "
        "through the Message Batches API (half price).")] = False,
    chunk_size: Annotated[int, typer.Option(help="Items per chunk task.")] = 50,
    batch_id: Annotated[str | None, typer.Option("--batch-id", help="Name the batch.")] = None,
    resume: Annotated[str | None, typer.Option(
        "--resume", help="Send the items left of this batch again.")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait/--no-wait", help="Follow the batch to its end (a progress bar).")] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to follow it.")] = 3600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Re-judge stored runs with today's prompts, models and rules, as a batch job; the runs
    themselves are never changed."""
    owner = tenant_of(tenant)
    selection = selection_of(since=since, until=until, session=session, verdicts=verdict,
                             statuses=status, prompt_versions=prompt_version, models=model,
                             limit=limit)
    with ExitStack() as stack:
        client = client_and_worker(stack, owner)
        if not VeritySettings().broker_url:
            wait = True  # the embedded worker lives only as long as this command
        if resume is not None:
            batch = client.resume(resume)
        else:
            batch = client.reverify(selection, provider=provider, message_batches=message_batches,
                                    chunk_size=chunk_size, batch_id=batch_id)
        if wait:
            batch = _follow(client, batch, timeout=timeout, quiet=as_json)
    if as_json:
        sys.stdout.write(json.dumps(_batch_json(batch), ensure_ascii=False) + "\n")
        return
    Console().print(_batch_line(batch), highlight=False)
    if batch.status.terminal:
        Console().print(f"report: verity reverify-report {batch.batch_id}", highlight=False)


def reverify_report(
    batch_id: Annotated[str, typer.Argument(help="A batch id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    csv_file: Annotated[Path | None, typer.Option(
        "--csv", help="Also write one row per item to this CSV file.")] = None,
    tenant: TenantOption = None,
) -> None:
    """What a batch changed: the verdict transition matrix, rules and claim classes that
    changed, the runs that flipped (worst first) and why, tokens and cost."""
    owner = tenant_of(tenant)
    from client import VerityClient

    with ExitStack() as stack:
        from pipeline.factory import build_runtime

        runtime = build_runtime(VeritySettings().model_copy(update={"provider": "offline"}))
        stack.callback(runtime.store.close)
        client = VerityClient(runtime, tenant=owner)
        report = client.batch_report(batch_id)
        if csv_file is not None:
            _write_csv(csv_file, runtime.store.iter_items(batch_id, tenant_id=owner))
    if as_json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
        return
    _print_report(report)


# -- following a batch -------------------------------------------------------------------------

def _follow(client: Any, batch: BatchRecord, *, timeout: float, quiet: bool) -> BatchRecord:
    """Poll the batch until it ends, with a live bar (items done / failed / per second, ETA)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    deadline = time.monotonic() + timeout
    started, first = time.monotonic(), batch.done + batch.failed
    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} done, {task.fields[failed]} failed, "
                          "{task.fields[rate]:.1f}/s"), TimeRemainingColumn())
    with Progress(*columns, console=_err, disable=quiet, transient=False) as bar:
        task = bar.add_task(f"batch {batch.batch_id[:12]}", total=batch.total or 1,
                            failed=0, rate=0.0)
        while True:
            batch = client.batch(batch.batch_id)
            finished = batch.done + batch.failed
            elapsed = max(time.monotonic() - started, 1e-6)
            bar.update(task, total=batch.total or 1, completed=finished, failed=batch.failed,
                       rate=(finished - first) / elapsed)
            if batch.status.terminal:
                return batch
            if time.monotonic() > deadline:
                raise ConfigurationError(
                    f"batch {batch.batch_id} still {batch.status.value} after {timeout:.0f}s; it "
                    f"goes on: verity reverify-report {batch.batch_id}")
            time.sleep(0.25)


def _batch_json(batch: BatchRecord) -> dict[str, Any]:
    return {"batch_id": batch.batch_id, "status": batch.status.value, "total": batch.total,
            "done": batch.done, "failed": batch.failed, "pending": batch.pending,
            "provider": batch.provider, "message_batches": batch.message_batches,
            "selection": batch.selection.model_dump(mode="json", exclude_defaults=True)}


def _batch_line(batch: BatchRecord) -> str:
    text = (f"batch {batch.batch_id}: {batch.status.value}, {batch.done} of {batch.total} "
            f"re-judged, {batch.failed} failed")
    if batch.status is BatchStatus.CANCELLED:
        text += f", {batch.pending} not started"
    return text


def _print_report(report: dict[str, Any]) -> None:
    out = Console()
    batch = report["batch"]
    out.print(f"batch {batch['batch_id']}: {batch['status']}, {report['judged']} judged, "
              f"{report['errors']} errors, {report['changed_verdicts']} verdicts changed",
              highlight=False)
    labels = report["verdict_labels"]
    matrix = Table("old \\ new", *labels, title="verdict transitions")
    for old, row in report["transitions"].items():
        matrix.add_row(old, *(str(row.get(new, 0)) for new in labels))
    out.print(matrix)
    if report["rules"]:
        rules = Table("rule", "now fails", "now passes", title="Gatekeeper rules")
        for rule, counts in report["rules"].items():
            rules.add_row(rule, str(counts.get("now_fails", 0)), str(counts.get("now_passes", 0)))
        out.print(rules)
    if report["claim_class_changes"]:
        classes = Table("claim check", "claims", title="claim checks that changed")
        for change, count in report["claim_class_changes"].items():
            classes.add_row(change, str(count))
        out.print(classes)
    if len(report["by_prompts"]) > 1:
        groups = Table("prompts used", "transitions", title="by prompt versions")
        for key, counts in report["by_prompts"].items():
            groups.add_row(key, ", ".join(f"{k}: {v}" for k, v in counts.items()))
        out.print(groups)
    _print_flips(out, report)
    for sample in report["error_samples"][:10]:
        out.print(f"error {sample['run_id']}: {sample['error']}", style="yellow",
                  highlight=False)
    out.print(f"tokens in {report['tokens']['input']}, out {report['tokens']['output']}; "
              f"cost ${report['cost_usd']:.4f}", highlight=False)


def _print_flips(out: Console, report: dict[str, Any]) -> None:
    """The runs whose verdict changed, worst first, with the claims that changed and why."""
    shown = report["flips"][:20]
    if shown:
        out.print(f"runs whose verdict changed, worst first ({len(shown)} of "
                  f"{report['changed_verdicts']}):", highlight=False)
    for flip in shown:
        out.print(f"[bold]{flip['run_id']}[/bold] {flip['old_verdict']} -> "
                  f"{flip['new_verdict']}", highlight=False)
        for claim in flip["claims"][:5]:
            out.print(f"  {claim['claim_id']}: {claim['old']} -> {claim['new']}", highlight=False)
        if len(flip["claims"]) > 5:
            out.print(f"  ... and {len(flip['claims']) - 5} more claims", highlight=False)
        for note in flip["downgrades"][:5]:
            out.print(f"  post-check: {note}", style="dim", highlight=False)
        if flip["rationale"]:
            out.print(f"  rationale: {flip['rationale']}", style="dim", highlight=False)


def _write_csv(path: Path, items: Any) -> None:
    try:
        handle = path.open("w", newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}") from None
    with handle:
        writer = csv.writer(handle)
        writer.writerow(["seq", "run_id", "status", "old_status", "old_verdict",
                         "old_fallback_type", "new_status", "new_verdict", "new_fallback_type",
                         "claims_changed", "input_tokens", "output_tokens", "cost_usd", "error"])
        for item in items:
            changed = [f"{c.claim_id}:{c.old.value if c.old else 'null'}->"
                       f"{c.new.value if c.new else 'null'}"
                       for c in (item.detail.claims if item.detail else []) if c.old != c.new]
            writer.writerow([item.seq, item.run_id, item.status.value, item.old_status,
                             item.old_verdict, item.old_fallback_type, item.new_status,
                             item.new_verdict, item.new_fallback_type, " ".join(changed),
                             item.input_tokens, item.output_tokens, item.cost_usd,
                             item.error or ""])


# -- helpers -----------------------------------------------------------------------------------

def _split(values: list[str] | None) -> list[str]:
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _moment(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    relative = _RELATIVE.fullmatch(text.strip())
    if relative:
        return datetime.now(UTC) - timedelta(
            seconds=int(relative.group(1)) * _UNIT_S[relative.group(2)])
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{option} {text!r}: give an ISO 8601 time or an age like 7d, 12h"
                         ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _summary(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id, "session_id": record.session_id, "query": record.query,
        "intent": record.intent.value, "status": record.status.value,
        "verdict": record.verdict.value if record.verdict else None,
        "created_at": record.created_at.isoformat() if record.created_at else None,
    }
