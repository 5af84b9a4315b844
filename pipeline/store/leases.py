"""Node leases and the attempt journal: the store's side of "one execution at a time per node".

A lease is two columns of the run row (`lease_owner`, `lease_expires_at`): a node copy may run
only while it holds the lease for the run's current version. It is taken by one conditional
UPDATE, renewed for all of a process's runs by one statement, given back on exit and cleared by
the commit that ends the node. Expiry is judged by the writer's clock, like every timestamp of
the store: the hosts' clocks must agree to well within a TTL.

The journal writes `llm_attempt` rows as requests happen: `in_flight` before a request goes
out, completed after it. A row's number is one above the highest stored for (run, role, cycle),
computed inside the INSERT; two copies racing for one number never violate the unique
constraint: the loser's `ON CONFLICT DO NOTHING` inserts nothing and it tries the next number.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from sqlalchemy import (
    Float,
    Integer,
    Select,
    String,
    bindparam,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from models.tables import DiagnosisRunRow, LlmAttemptRow, UtcDateTime
from pipeline.errors import RunNotFoundError, StoreError
from pipeline.store.engine import TERMINAL, Database
from pipeline.store.pg import HotPath
from pipeline.store.rows import utc_now

__all__ = ["ABANDONED", "IN_FLIGHT", "CoreLeaseSql", "LeaseOutcome", "LeaseSql", "LeaseState",
           "Leases", "PgLeaseSql"]

IN_FLIGHT = "in_flight"
"""Outcome of a journaled attempt whose request is out and not answered yet."""
ABANDONED = "abandoned"
"""Outcome of an in-flight attempt whose node copy died (its answer will never be known)."""
_OPEN = (IN_FLIGHT, ABANDONED)  # a late answer still completes an abandoned row
_NUMBER_TRIES = 50
"""Numbers tried by one insert before giving up: each loss means another copy just took one."""

LeaseState = Literal["acquired", "leased", "stale", "ended"]


@dataclass(frozen=True, slots=True)
class LeaseOutcome:
    """What `acquire_lease` found.

    `state`: `acquired` (ours now), `leased` (another owner holds a live lease), `stale` (the
    run is at another version), `ended` (terminal or cancel requested). `version` is the run's
    version as found; `owner` and `expires_at` the lease's holder and expiry (ours if acquired).
    """

    state: LeaseState
    version: int
    owner: str | None = None
    expires_at: datetime | None = None

    @property
    def acquired(self) -> bool:
        """Whether the lease is ours."""
        return self.state == "acquired"


# -- statements: the SQLAlchemy Core path (SQLite) ------------------------------------------

RUN = DiagnosisRunRow
ATTEMPT = LlmAttemptRow

_LIVE = (RUN.status.not_in(TERMINAL), RUN.cancel_requested.is_(False))
ACQUIRE = (
    update(RUN)
    .where(RUN.run_id == bindparam("p_run_id"), RUN.version == bindparam("p_version"), *_LIVE,
           or_(RUN.lease_owner.is_(None), RUN.lease_expires_at < bindparam("p_now"),
               RUN.lease_owner == bindparam("p_owner")))
    .values(lease_owner=bindparam("p_owner"), lease_expires_at=bindparam("p_expires"))
    .returning(RUN.run_id)
)
SELECT_LEASE = select(RUN.version, RUN.status, RUN.cancel_requested, RUN.lease_owner,
                      RUN.lease_expires_at).where(RUN.run_id == bindparam("p_run_id"))
RENEW = (
    update(RUN)
    .where(RUN.run_id.in_(bindparam("p_run_ids", expanding=True)),
           RUN.lease_owner == bindparam("p_owner"), *_LIVE)
    .values(lease_expires_at=bindparam("p_expires"))
    .returning(RUN.run_id)
)
RELEASE = (
    update(RUN)
    .where(RUN.run_id == bindparam("p_run_id"), RUN.lease_owner == bindparam("p_owner"))
    .values(lease_owner=None, lease_expires_at=None)
)

# a live run's attempts (batch_id ''): a re-verification's attempts never take their numbers
_SAME_CALL = (ATTEMPT.run_id == RUN.run_id, ATTEMPT.batch_id == "",
              ATTEMPT.role == bindparam("p_role"), ATTEMPT.cycle == bindparam("p_cycle"))
_NEXT_NUMBER = select(func.coalesce(func.max(ATTEMPT.attempt_number), 0) + 1).where(
    *_SAME_CALL).scalar_subquery()
_ROW = {
    "run_id": RUN.run_id,
    "role": bindparam("p_role", type_=String),
    "cycle": bindparam("p_cycle", type_=Integer),
    "attempt_number": _NEXT_NUMBER,
    "prompt_name": bindparam("p_prompt_name", type_=String),
    "prompt_version": bindparam("p_prompt_version", type_=String),
    "input_sha256": bindparam("p_input_sha256", type_=String),
    "model": bindparam("p_model", type_=String),
    "latency_ms": bindparam("p_latency_ms", type_=Float),
    "input_tokens": bindparam("p_input_tokens", type_=Integer),
    "output_tokens": bindparam("p_output_tokens", type_=Integer),
    "cache_read_tokens": bindparam("p_cache_read_tokens", type_=Integer),
    "cache_write_tokens": bindparam("p_cache_write_tokens", type_=Integer),
    "cost_usd": bindparam("p_cost_usd", type_=Float),
    "outcome": bindparam("p_outcome", type_=String),
    "error_type": bindparam("p_error_type", type_=String),
    "created_at": bindparam("p_now", type_=UtcDateTime()),
}
_SOURCE: Select[*tuple[Any, ...]] = select(
    *(value.label(name) for name, value in _ROW.items())
).where(RUN.run_id == bindparam("p_run_id"))
INSERT_NUMBERED = (
    sqlite_insert(ATTEMPT)
    .from_select(list(_ROW), _SOURCE)
    .on_conflict_do_nothing(
        index_elements=["run_id", "batch_id", "role", "cycle", "attempt_number"])
    .returning(ATTEMPT.attempt_number)
)
"""One attempt row numbered one above the highest of its run, role and cycle; nothing if the
run does not exist or the number was taken meanwhile (PostgreSQL: another copy's concurrent
insert)."""
_SAME_ROW = (ATTEMPT.run_id == bindparam("p_run_id"), ATTEMPT.batch_id == "",
             ATTEMPT.role == bindparam("p_role"),
             ATTEMPT.cycle == bindparam("p_cycle"),
             ATTEMPT.attempt_number == bindparam("p_number"))
END_ATTEMPT = (
    update(ATTEMPT)
    .where(*_SAME_ROW, ATTEMPT.outcome.in_(_OPEN))
    .values(outcome=bindparam("p_outcome"), latency_ms=bindparam("p_latency_ms"),
            input_tokens=bindparam("p_input_tokens"), output_tokens=bindparam("p_output_tokens"),
            cache_read_tokens=bindparam("p_cache_read_tokens"),
            cache_write_tokens=bindparam("p_cache_write_tokens"),
            cost_usd=bindparam("p_cost_usd"), error_type=bindparam("p_error_type"),
            created_at=bindparam("p_now"), reply=bindparam("p_reply"))
)
ANSWERED = (
    select(ATTEMPT.reply)
    .where(ATTEMPT.run_id == bindparam("p_run_id"), ATTEMPT.batch_id == "",
           ATTEMPT.role == bindparam("p_role"), ATTEMPT.cycle == bindparam("p_cycle"),
           ATTEMPT.input_sha256 == bindparam("p_input_sha256"), ATTEMPT.outcome == "ok",
           ATTEMPT.reply.is_not(None))
    .order_by(ATTEMPT.attempt_number.desc()).limit(1)
)
ABANDON = (
    update(ATTEMPT)
    .where(ATTEMPT.run_id == bindparam("p_run_id"), ATTEMPT.batch_id == "",
           ATTEMPT.outcome == IN_FLIGHT)
    .values(outcome=ABANDONED)
)
RUN_EXISTS = select(RUN.run_id).where(RUN.run_id == bindparam("p_run_id"))

# -- statements: PostgreSQL's hot path (one statement each, autocommit) ------------------------

_PG_NOT_TERMINAL = "status NOT IN ({})".format(", ".join(f"'{s}'" for s in TERMINAL))
_PG_LIVE = f"{_PG_NOT_TERMINAL} AND NOT cancel_requested"
PG_ACQUIRE = f"""
WITH taken AS (
  UPDATE diagnosis_run SET lease_owner = %(p_owner)s, lease_expires_at = %(p_expires)s
  WHERE run_id = %(p_run_id)s AND version = %(p_version)s AND {_PG_LIVE}
    AND (lease_owner IS NULL OR lease_expires_at < %(p_now)s OR lease_owner = %(p_owner)s)
  RETURNING run_id
)
SELECT EXISTS (SELECT 1 FROM taken), r.version, r.status, r.cancel_requested, r.lease_owner,
       r.lease_expires_at
FROM diagnosis_run r WHERE r.run_id = %(p_run_id)s
"""
"""The conditional UPDATE, and the row as it was before it (a CTE's writes are not visible to
its own statement): why not, in the same round trip."""
PG_RENEW = f"""
UPDATE diagnosis_run SET lease_expires_at = %(p_expires)s
WHERE run_id = ANY(%(p_run_ids)s) AND lease_owner = %(p_owner)s AND {_PG_LIVE}
RETURNING run_id
"""
PG_RELEASE = """
UPDATE diagnosis_run SET lease_owner = NULL, lease_expires_at = NULL
WHERE run_id = %(p_run_id)s AND lease_owner = %(p_owner)s
"""
PG_INSERT_NUMBERED = """
WITH p AS (SELECT CAST(%(p_role)s AS varchar) AS role, CAST(%(p_cycle)s AS integer) AS cycle)
INSERT INTO llm_attempt (run_id, role, cycle, attempt_number, prompt_name, prompt_version,
                         input_sha256, model, latency_ms, input_tokens, output_tokens,
                         cache_read_tokens, cache_write_tokens, cost_usd, outcome, error_type,
                         created_at)
SELECT r.run_id, p.role, p.cycle,
       COALESCE((SELECT MAX(a.attempt_number) FROM llm_attempt a
                 WHERE a.run_id = r.run_id AND a.batch_id = '' AND a.role = p.role
                   AND a.cycle = p.cycle), 0) + 1,
       %(p_prompt_name)s, %(p_prompt_version)s, %(p_input_sha256)s, %(p_model)s,
       %(p_latency_ms)s, %(p_input_tokens)s, %(p_output_tokens)s, %(p_cache_read_tokens)s,
       %(p_cache_write_tokens)s, %(p_cost_usd)s, %(p_outcome)s, %(p_error_type)s, %(p_now)s
FROM diagnosis_run r, p WHERE r.run_id = %(p_run_id)s
ON CONFLICT (run_id, batch_id, role, cycle, attempt_number) DO NOTHING
RETURNING attempt_number
"""
PG_END_ATTEMPT = """
UPDATE llm_attempt SET outcome = %(p_outcome)s, latency_ms = %(p_latency_ms)s,
  input_tokens = %(p_input_tokens)s, output_tokens = %(p_output_tokens)s,
  cache_read_tokens = %(p_cache_read_tokens)s, cache_write_tokens = %(p_cache_write_tokens)s,
  cost_usd = %(p_cost_usd)s, error_type = %(p_error_type)s, created_at = %(p_now)s,
  reply = %(p_reply)s
WHERE run_id = %(p_run_id)s AND batch_id = '' AND role = %(p_role)s AND cycle = %(p_cycle)s
  AND attempt_number = %(p_number)s AND outcome IN ('in_flight', 'abandoned')
"""
PG_ABANDON = """
UPDATE llm_attempt SET outcome = 'abandoned'
WHERE run_id = %(p_run_id)s AND batch_id = '' AND outcome = 'in_flight'
"""
PG_RUN_EXISTS = "SELECT 1 FROM diagnosis_run WHERE run_id = %(p_run_id)s"
PG_ANSWERED = """
SELECT reply FROM llm_attempt
WHERE run_id = %(p_run_id)s AND batch_id = '' AND role = %(p_role)s AND cycle = %(p_cycle)s
  AND input_sha256 = %(p_input_sha256)s AND outcome = 'ok' AND reply IS NOT NULL
ORDER BY attempt_number DESC LIMIT 1
"""


class LeaseSql(Protocol):
    """One backend's statements for leases and the journal, each one round trip; `Leases`
    holds the logic around them (retries, numbering, refusals)."""

    def acquire(self, params: dict[str, Any]) -> tuple[bool, Sequence[Any]]:
        """Whether the conditional UPDATE took the lease, and the lease columns as found
        (version, status, cancel_requested, owner, expires_at); RunNotFoundError."""
        ...

    def renew(self, params: dict[str, Any]) -> set[str]:
        """The run ids whose lease was extended."""
        ...

    def release(self, params: dict[str, Any]) -> bool:
        """Whether the owner's lease was given back."""
        ...

    def insert_numbered(self, params: dict[str, Any]) -> int | None:
        """The number an attempt row was stored under, None if another copy took it first;
        RunNotFoundError without the run."""
        ...

    def end(self, params: dict[str, Any]) -> bool:
        """Whether an open attempt row was completed."""
        ...

    def answered(self, params: dict[str, Any]) -> str | None:
        """The accepted reply of an earlier attempt of the same call, if any."""
        ...

    def abandon(self, params: dict[str, Any]) -> int:
        """How many in-flight rows were marked abandoned."""
        ...


class CoreLeaseSql:
    """`LeaseSql` as SQLAlchemy Core statements in a write transaction (SQLite)."""

    def __init__(self, db: Database) -> None:
        """`db`: the store's database."""
        self._db = db

    def acquire(self, params: dict[str, Any]) -> tuple[bool, Sequence[Any]]:
        """See `LeaseSql.acquire`."""
        with self._db.connect_write() as connection:
            taken = connection.execute(ACQUIRE, params).first() is not None
            row = connection.execute(SELECT_LEASE, params).one_or_none()
        if row is None:
            raise RunNotFoundError(params["p_run_id"])
        return taken, tuple(row)

    def renew(self, params: dict[str, Any]) -> set[str]:
        """See `LeaseSql.renew`."""
        with self._db.connect_write() as connection:
            return set(connection.execute(RENEW, params).scalars())

    def release(self, params: dict[str, Any]) -> bool:
        """See `LeaseSql.release`."""
        with self._db.connect_write() as connection:
            return bool(connection.execute(RELEASE, params).rowcount == 1)

    def insert_numbered(self, params: dict[str, Any]) -> int | None:
        """See `LeaseSql.insert_numbered`."""
        with self._db.connect_write() as connection:
            row = connection.execute(INSERT_NUMBERED, params).first()
            if row is None and connection.execute(RUN_EXISTS, params).first() is None:
                raise RunNotFoundError(params["p_run_id"])
        return None if row is None else int(row[0])

    def end(self, params: dict[str, Any]) -> bool:
        """See `LeaseSql.end`."""
        with self._db.connect_write() as connection:
            return bool(connection.execute(END_ATTEMPT, params).rowcount == 1)

    def answered(self, params: dict[str, Any]) -> str | None:
        """See `LeaseSql.answered`."""
        with self._db.connect_write() as connection:
            value = connection.execute(ANSWERED, params).scalar_one_or_none()
        return None if value is None else str(value)

    def abandon(self, params: dict[str, Any]) -> int:
        """See `LeaseSql.abandon`."""
        with self._db.connect_write() as connection:
            return int(connection.execute(ABANDON, params).rowcount)


class PgLeaseSql:
    """`LeaseSql` as PostgreSQL's hot path: one autocommit statement each."""

    def __init__(self, hot: HotPath) -> None:
        """`hot`: the store's hot path."""
        self._hot = hot

    def acquire(self, params: dict[str, Any]) -> tuple[bool, Sequence[Any]]:
        """See `LeaseSql.acquire`."""
        found = self._hot.fetch_one(PG_ACQUIRE, params)
        if found is None:
            raise RunNotFoundError(params["p_run_id"])
        return bool(found[0]), tuple(found[1:])

    def renew(self, params: dict[str, Any]) -> set[str]:
        """See `LeaseSql.renew`."""
        with self._hot.cursor() as cursor:
            cursor.execute(PG_RENEW, params)
            return {row[0] for row in cursor.fetchall()}

    def release(self, params: dict[str, Any]) -> bool:
        """See `LeaseSql.release`."""
        return self._hot.rowcount(PG_RELEASE, params) == 1

    def insert_numbered(self, params: dict[str, Any]) -> int | None:
        """See `LeaseSql.insert_numbered`."""
        found = self._hot.fetch_one(PG_INSERT_NUMBERED, params)
        if found is None and self._hot.fetch_one(PG_RUN_EXISTS, params) is None:
            raise RunNotFoundError(params["p_run_id"])
        return None if found is None else int(found[0])

    def end(self, params: dict[str, Any]) -> bool:
        """See `LeaseSql.end`."""
        return self._hot.rowcount(PG_END_ATTEMPT, params) == 1

    def answered(self, params: dict[str, Any]) -> str | None:
        """See `LeaseSql.answered`."""
        found = self._hot.fetch_one(PG_ANSWERED, params)
        return None if found is None else str(found[0])

    def abandon(self, params: dict[str, Any]) -> int:
        """See `LeaseSql.abandon`."""
        return self._hot.rowcount(PG_ABANDON, params)


class Leases:
    """Node leases and the attempt journal, on one backend's `LeaseSql`; a part of a store."""

    def __init__(self, sql: LeaseSql) -> None:
        """`sql`: the backend's statements."""
        self._sql = sql

    # -- leases -------------------------------------------------------------------------

    def acquire_lease(
        self, run_id: str, *, version: int, owner: str, ttl_s: float
    ) -> LeaseOutcome:
        for _ in range(3):  # a lease seen free but taken meanwhile: look again
            now = utc_now()
            expires = now + timedelta(seconds=ttl_s)
            params = {"p_run_id": run_id, "p_version": version, "p_owner": owner,
                      "p_now": now, "p_expires": expires}
            taken, found = self._sql.acquire(params)
            if taken:
                return LeaseOutcome("acquired", version, owner, expires)
            outcome = _refusal(version, *found)
            if outcome.state != "leased" or not _free(outcome, owner=owner, now=now):
                return outcome
        return outcome

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        ids = sorted(set(run_ids))
        if not ids:
            return set()
        params = {"p_owner": owner, "p_run_ids": ids,
                  "p_expires": utc_now() + timedelta(seconds=ttl_s)}
        return set(ids) - self._sql.renew(params)

    def release_lease(self, run_id: str, owner: str) -> bool:
        return self._sql.release({"p_run_id": run_id, "p_owner": owner})

    # -- the attempt journal ----------------------------------------------------------------

    def begin_attempt(
        self, run_id: str, *, role: str, cycle: int, prompt_name: str, prompt_version: str,
        input_sha256: str, model: str,
    ) -> int:
        params = {
            "p_run_id": run_id, "p_role": role, "p_cycle": cycle,
            "p_prompt_name": prompt_name, "p_prompt_version": prompt_version,
            "p_input_sha256": input_sha256, "p_model": model, "p_outcome": IN_FLIGHT,
            "p_now": utc_now(), "p_latency_ms": 0.0, "p_input_tokens": 0,
            "p_output_tokens": 0, "p_cache_read_tokens": 0, "p_cache_write_tokens": 0,
            "p_cost_usd": 0.0, "p_error_type": None,
        }
        for _ in range(_NUMBER_TRIES):
            stored = self._sql.insert_numbered(params)
            if stored is not None:
                return stored
        raise StoreError(f"no free attempt number in run {run_id} for {role}, cycle {cycle}")

    def end_attempt(
        self, run_id: str, role: str, cycle: int, number: int, *, outcome: str,
        input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, latency_ms: float = 0.0, cost_usd: float = 0.0,
        error_type: str | None = None, reply: str | None = None,
    ) -> bool:
        return self._sql.end({
            "p_reply": reply,
            "p_run_id": run_id, "p_role": role, "p_cycle": cycle, "p_number": number,
            "p_now": utc_now(),
            "p_outcome": outcome, "p_input_tokens": input_tokens,
            "p_output_tokens": output_tokens, "p_cache_read_tokens": cache_read_tokens,
            "p_cache_write_tokens": cache_write_tokens, "p_latency_ms": latency_ms,
            "p_cost_usd": cost_usd, "p_error_type": error_type,
        })

    def answered(self, run_id: str, *, role: str, cycle: int, input_sha256: str) -> str | None:
        return self._sql.answered({"p_run_id": run_id, "p_role": role, "p_cycle": cycle,
                                   "p_input_sha256": input_sha256})

    def abandon_in_flight(self, run_id: str) -> int:
        return self._sql.abandon({"p_run_id": run_id})


def _refusal(version: int, found_version: int, status: str, cancel_requested: bool,
             owner: str | None, expires_at: datetime | None) -> LeaseOutcome:
    if status in TERMINAL or cancel_requested:
        return LeaseOutcome("ended", found_version, owner, expires_at)
    if found_version != version:
        return LeaseOutcome("stale", found_version, owner, expires_at)
    return LeaseOutcome("leased", found_version, owner, expires_at)


def _free(outcome: LeaseOutcome, *, owner: str, now: datetime) -> bool:
    """Whether a refused lease looked takeable (so the refusal was a race)."""
    return (outcome.owner is None or outcome.owner == owner or outcome.expires_at is None
            or outcome.expires_at < now)
