"""`verity`: verify bundles, run diagnoses, show stored runs, list data sources, print
contract schemas.

Commands that touch stored runs act as one tenant (`--tenant`, else VERITY_TENANT, else
`default`) and see only its runs; another tenant's run id is "no run with id ...".

Every error the user can cause is one line on stderr and exit code 2; `--json` prints exactly
one JSON object on stdout and nothing else.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from rich.console import Console
from typer.exceptions import Abort, TyperException

from cli import batch, check, runs, serve, sources, tokens
from cli.inputs import VerifyProvider, emit_json, open_run_store, read_input, verify_models
from cli.render import print_deliveries, print_invocations, print_result, print_usage
from cli.runs import TenantOption, tenant_of
from cli.schemas import SCHEMAS
from models.bundle import RunResult
from models.run import RunRecord
from pipeline.checks import result_of
from pipeline.config import VeritySettings
from pipeline.errors import InputError, StoreError, VerityError
from pipeline.verification import load_bundle, verify_bundle

app = typer.Typer(
    name="verity",
    help="Evidence-grounded incident diagnosis.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
_out = Console(soft_wrap=False)


@app.command()
def verify(
    bundle: Annotated[str, typer.Argument(help="Run bundle JSON file, or - for stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    store: Annotated[bool, typer.Option("--store", help="Store the run in the database.")] = False,
    provider: Annotated[VerifyProvider, typer.Option(
        "--provider", help="Verifier and Composer: offline (deterministic, the default) or "
        "anthropic (Claude, as a live run; needs ANTHROPIC_API_KEY).")] = VerifyProvider.OFFLINE,
    tenant: TenantOption = None,
) -> None:
    """Run parse → gatekeep → verify → compose (or the fallback) on a run bundle."""
    owner = tenant_of(tenant)
    settings = VeritySettings()
    parsed = load_bundle(read_input(bundle, max_bytes=settings.bundle_max_bytes),
                         settings=settings)
    verifier, composer = verify_models(provider, settings)
    run = verify_bundle(parsed, verifier=verifier, composer=composer, settings=settings)
    if store:
        with open_run_store() as run_store:
            run_store.save_verified_run(
                tenant_id=owner, bundle=parsed, result=run.result, events=run.events,
                attempts=run.attempts,
            )
    if as_json:
        emit_json(run.result.model_dump(mode="json"))
        return
    print_result(_out, run.result, title=parsed.query)
    if store:
        _out.print(f"Stored. Show it again with: verity show {run.result.run_id}", style="dim")


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="A stored run id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Print a stored run: its answer, verdict, claims, tool calls, model attempts and
    notification deliveries."""
    owner = tenant_of(tenant)
    with open_run_store() as run_store:
        record = run_store.get_run(run_id, tenant_id=owner)  # the tenant's, or not found
        invocations = run_store.list_invocations(run_id)
        attempts = run_store.list_attempts(run_id)
        events = run_store.events_since(run_id, 0, tenant_id=owner)
        deliveries = run_store.list_deliveries(run_id, tenant_id=owner)
    if as_json:
        payload = record.model_dump(mode="json")
        payload["invocations"] = [
            {"tool_call_id": i.tool_call_id, "tool_name": i.tool_name,
             "arguments": i.arguments, "status": i.status,
             "evidence_status": i.evidence_status, "error": i.error,
             "truncated": bool(i.projection and i.projection.truncated)}
            for i in invocations
        ]
        payload["attempts"] = [a.model_dump(mode="json") for a in attempts]
        payload["usage"] = {
            "input_tokens": sum(a.input_tokens for a in attempts),
            "output_tokens": sum(a.output_tokens for a in attempts),
            "cost_usd": round(sum(a.cost_usd for a in attempts), 6),
        }
        payload["events"] = [e.model_dump(mode="json") for e in events]
        payload["deliveries"] = [d.model_dump(mode="json") for d in deliveries]
        emit_json(payload)
        return
    result = _as_result(record)
    if result is None:
        _out.print(f"run {record.run_id}: {record.status.value} (node {record.node or '-'})")
    else:
        print_result(_out, result, title=record.query)
        print_invocations(_out, invocations)
        print_usage(_out, attempts)
    if record.alert is not None:
        alert = record.alert
        state = (f"resolved at {alert.resolved_at.isoformat()}" if alert.resolved_at
                 else "not resolved")
        _out.print(f"alert {alert.alertname} since {alert.starts_at.isoformat()}: {state}",
                   markup=False)
    print_deliveries(_out, deliveries)


def _as_result(record: RunRecord) -> RunResult | None:
    try:
        return result_of(record)
    except InputError:
        return None


@app.command()
def schema(
    name: Annotated[str, typer.Argument(help="Contract name; see the list in the error.")],
) -> None:
    """Print the JSON Schema of a contract."""
    model = SCHEMAS.get(name)
    if model is None:
        raise InputError(f"unknown schema {name!r}; known: {', '.join(sorted(SCHEMAS))}")
    emit_json(model.model_json_schema())


app.command()(runs.run)
app.command("check-answer")(check.check_answer)
app.command("import")(check.import_run)
app.command()(batch.runs)
app.command()(batch.reverify)
app.command("reverify-report")(batch.reverify_report)
app.command()(runs.cancel)
app.command()(runs.export)
app.command()(runs.scenarios)
app.command()(runs.worker)
app.command()(runs.reconcile)
app.command()(serve.serve)
app.add_typer(tokens.app)
app.add_typer(sources.app, name="sources")


def main() -> None:
    """Entry point: run the app, turning every user-caused error into one line and exit 2."""
    try:
        code = app(standalone_mode=False)
    except TyperException as exc:  # usage errors: missing or bad arguments
        _fail(exc.format_message(), code=2)
    except (Abort, KeyboardInterrupt):
        _fail("aborted", code=130)
    except (InputError, StoreError) as exc:
        _fail(str(exc), code=2)
    except VerityError as exc:
        _fail(str(exc), code=1)
    except Exception as exc:  # a last line of defence: no traceback for users
        if os.environ.get("VERITY_DEBUG"):
            raise
        _fail(f"internal error ({type(exc).__name__}): {exc}".splitlines()[0], code=1)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, *, code: int) -> None:
    sys.stderr.write(f"verity: error: {message.splitlines()[0] if message else 'failed'}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
