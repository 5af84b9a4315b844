"""HTTP API tokens in the store: created, looked up by the sha256 of their secret, listed and
revoked. A part of a store (`Tokens`, and `PgTokens` whose per-request lookup is one prepared
statement); the secret itself never reaches this module."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from models.tables import ApiTokenRow
from models.token import ApiToken
from pipeline.errors import InputError
from pipeline.ids import check_tenant_id
from pipeline.store import convert
from pipeline.store.engine import Database
from pipeline.store.pg import HotPath
from pipeline.store.rows import rowcount, utc_now

TOUCH_EVERY = timedelta(minutes=1)
"""`last_used_at` is written at most this often per token: a read per request, not a write."""
MAX_NAME = 128


class Tokens:
    """API tokens, read and written through the ORM."""

    def __init__(self, db: Database) -> None:
        """`db`: the store's database."""
        self._db = db

    def create_token(self, *, token_id: str, tenant_id: str, name: str, secret_sha256: str
                     ) -> ApiToken:
        name = name.strip()
        if not name or len(name) > MAX_NAME:
            raise InputError(f"a token name is 1 to {MAX_NAME} characters")
        row = ApiTokenRow(token_id=token_id, tenant_id=check_tenant_id(tenant_id), name=name,
                          secret_sha256=secret_sha256, created_at=utc_now())
        with self._db.write() as session:
            session.add(row)
        return convert.token(row)

    def token_by_secret_hash(self, secret_sha256: str, *, now: datetime | None = None
                             ) -> ApiToken | None:
        moment = now or utc_now()
        token = self._live_token(secret_sha256)
        if token is None:
            return None
        if token.last_used_at is None or moment - token.last_used_at >= TOUCH_EVERY:
            touch = (update(ApiTokenRow).where(ApiTokenRow.token_id == token.token_id)
                     .where(or_(ApiTokenRow.last_used_at.is_(None),
                                ApiTokenRow.last_used_at < moment - TOUCH_EVERY))
                     .values(last_used_at=moment))
            with self._db.write() as session:
                session.execute(touch)
            token = token.model_copy(update={"last_used_at": moment})
        return token

    def _live_token(self, secret_sha256: str) -> ApiToken | None:
        stmt = select(ApiTokenRow).where(ApiTokenRow.secret_sha256 == secret_sha256,
                                         ApiTokenRow.revoked_at.is_(None))
        with self._db.read() as session:
            row = session.scalars(stmt).one_or_none()
            return convert.token(row) if row is not None else None

    def list_tokens(self, *, tenant_id: str | None = None) -> list[ApiToken]:
        stmt = select(ApiTokenRow).order_by(ApiTokenRow.created_at, ApiTokenRow.token_id)
        if tenant_id is not None:
            stmt = stmt.where(ApiTokenRow.tenant_id == tenant_id)
        with self._db.read() as session:
            return [convert.token(row) for row in session.scalars(stmt)]

    def revoke_token(self, token_id: str) -> bool:
        stmt = (update(ApiTokenRow)
                .where(ApiTokenRow.token_id == token_id, ApiTokenRow.revoked_at.is_(None))
                .values(revoked_at=utc_now()))
        with self._db.write() as session:
            return rowcount(session.execute(stmt)) == 1


_LIVE_TOKEN = (f"SELECT {', '.join(convert.TOKEN_FIELDS)} FROM api_token "
               "WHERE secret_sha256 = %(p_hash)s AND revoked_at IS NULL")


class PgTokens(Tokens):
    """API tokens on PostgreSQL: every API request reads its token, so the lookup is one
    prepared statement on the hot path's autocommit pool (no ORM session)."""

    def __init__(self, db: Database, hot: HotPath) -> None:
        """`db`: the store's database; `hot`: its hot path."""
        super().__init__(db)
        self._hot = hot

    def _live_token(self, secret_sha256: str) -> ApiToken | None:
        found = self._hot.fetch_one(_LIVE_TOKEN, {"p_hash": secret_sha256})
        if found is None:
            return None
        return convert.token_of(found)
