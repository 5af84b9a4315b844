"""`verity tokens create|list|revoke`: the HTTP API's tokens, each bound to one tenant.

    verity tokens create --tenant team-payments --name web-app   # prints the secret, once
    verity tokens list [--tenant team-payments] [--json]
    verity tokens revoke TOKEN_ID

Only the secret's sha256 is stored: a lost secret is revoked and replaced, never shown again.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pipeline.config import VeritySettings, resolve_database_url
from pipeline.errors import InputError
from pipeline.ids import check_tenant_id
from pipeline.store import RunStore, open_store
from pipeline.tokens import hash_secret, new_secret, new_token_id

app = typer.Typer(name="tokens", help="HTTP API tokens: create, list, revoke.",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _open_store() -> RunStore:
    return open_store(resolve_database_url(VeritySettings()))


@app.command()
def create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the token acts as.")],
    name: Annotated[str, typer.Option("--name", help="What it is for, e.g. web-app.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Create a token; its secret is printed once and never stored."""
    owner = check_tenant_id(tenant)
    secret = new_secret()
    with _open_store() as store:
        token = store.create_token(token_id=new_token_id(), tenant_id=owner, name=name,
                                   secret_sha256=hash_secret(secret))
    if as_json:
        payload = {**token.model_dump(mode="json"), "secret": secret}
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    sys.stdout.write(f"{secret}\n")
    Console(stderr=True).print(
        f"token {token.token_id} of tenant {owner} ({token.name}): the line above is its "
        "secret, shown only now. Send it as 'Authorization: Bearer <secret>'.", highlight=False)


@app.command("list")
def list_(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List tokens (never their secrets), revoked ones included."""
    owner = check_tenant_id(tenant) if tenant is not None else None
    with _open_store() as store:
        tokens = store.list_tokens(tenant_id=owner)
    if as_json:
        payload = {"tokens": [t.model_dump(mode="json") for t in tokens]}
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    table = Table("token", "tenant", "name", "created (UTC)", "last used", "revoked",
                  box=None, pad_edge=False)
    for t in tokens:
        table.add_row(t.token_id, t.tenant_id, t.name, _when(t.created_at), _when(t.last_used_at),
                      _when(t.revoked_at))
    Console().print(table)


@app.command()
def revoke(token_id: Annotated[str, typer.Argument(help="A token id (verity tokens list).")]
           ) -> None:
    """Revoke a token: every later request with it is a 401."""
    with _open_store() as store:
        if not store.revoke_token(token_id):
            known = {t.token_id: t for t in store.list_tokens()}
            if token_id not in known:
                raise InputError(f"no token with id {token_id!r}")
            Console().print(f"token {token_id}: already revoked")
            return
    Console().print(f"token {token_id}: revoked")


def _when(moment: object) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if hasattr(moment, "strftime") else "-"
