"""`verity sources` lists the data sources runs can name; `verity sources check NAME` probes
each backend of one, one line per backend (reachable, version, auth), exit 0 when every
backend answered and took the credentials, 1 otherwise. A broken sources file is one line and
exit 2.

The sources file is `$VERITY_CONFIG`, else `$XDG_CONFIG_HOME/verity/config.toml` (see
`pipeline.sources.config`); the shipped scenarios are always there as `scenario:NAME`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pipeline.data.source import BackendStatus
from pipeline.errors import ConfigurationError, InputError
from pipeline.sources.registry import SourceInfo, SourceRegistry, sources

app = typer.Typer(help="List the data sources runs can name, and probe their backends.",
                  no_args_is_help=False, add_completion=False)

T = TypeVar("T")


def _config_errors_are_input(action: Callable[[SourceRegistry], T]) -> T:
    """A broken sources file is the user's to fix: exit 2, like any bad input."""
    registry = sources()
    try:
        return action(registry)
    except ConfigurationError as exc:
        raise InputError(str(exc)) from None


@app.callback(invoke_without_command=True)
def list_sources(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List the configured sources and the shipped scenarios (scenario:NAME)."""
    if ctx.invoked_subcommand is not None:
        return
    registry = sources()
    infos = _config_errors_are_input(lambda r: r.describe())
    if as_json:
        payload = {"config": str(registry.path) if registry.path.is_file() else None,
                   "sources": [info.as_json() for info in infos]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    out = Console(soft_wrap=True)
    where = (f"sources file {registry.path}" if registry.path.is_file()
             else f"no sources file at {registry.path}: only the shipped scenarios")
    out.print(escape(where), style="dim", highlight=False)
    for info in infos:
        out.print(_info_line(info), highlight=False)


def _info_line(info: SourceInfo) -> str:
    parts = [f"[bold]{escape(info.name)}[/bold]", info.kind]
    if info.description:
        parts.append(escape(info.description))
    if info.backends:
        parts.append(escape(", ".join(f"{kind} {url}" for kind, url in info.backends)))
    elif info.scenario and not info.name.startswith("scenario:"):
        parts.append(escape(info.scenario))
    return "  ".join(parts)


@app.command("check")
def check(
    name: Annotated[str, typer.Argument(help="A source name (see verity sources).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Probe each backend of a source: one line per backend; exit 1 if any is unreachable or
    refused the credentials."""
    registry = sources()
    try:
        statuses = _config_errors_are_input(lambda r: r.check(name))
    finally:
        registry.close()
    ok = bool(statuses) and all(s.reachable and s.auth_ok is not False for s in statuses)
    if as_json:
        payload = {"source": name, "ok": ok, "backends": [_status_json(s) for s in statuses]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        out = Console(soft_wrap=True)
        for status in statuses:
            out.print(escape(status_line(status)), highlight=False)
    if not ok:
        raise typer.Exit(1)


def status_line(status: BackendStatus) -> str:
    """`prometheus  http://…:9090  reachable  version 2.53.0  auth ok`, or why not."""
    parts = [f"{status.backend:<12}", status.url, "reachable" if status.reachable
             else "UNREACHABLE"]
    if status.version:
        parts.append(f"version {status.version}")
    if status.auth_ok is not None:
        parts.append("auth ok" if status.auth_ok else "auth refused")
    if status.detail:
        parts.append(status.detail)
    return "  ".join(parts[:1] + [" ".join(p.split()) for p in parts[1:] if p])


def _status_json(status: BackendStatus) -> dict[str, Any]:
    return {"backend": status.backend, "url": status.url, "reachable": status.reachable,
            "version": status.version, "auth_ok": status.auth_ok, "detail": status.detail,
            **({"extra": status.extra} if status.extra else {})}
