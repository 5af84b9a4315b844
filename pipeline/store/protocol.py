"""`RunStore`: the run store's interface, every read and write of run state the rest of Verity
makes (the runtime, tasks, the API, the CLI, re-verification, the benchmarks).

Each backend is one class behind it (`SqliteStore`, `PostgresStore`), and `open_store(url)`
returns the one the URL names. A backend declares what it can do beyond the interface in
`capabilities`; the conformance suite (tests/store) runs every test on every backend and skips
a test only where a capability it needs is not declared.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Protocol

from models.alert import AlertGroup, AlertOutcome, RunAlert
from models.batch import BatchRecord, ItemRecord, ItemResult, Selection
from models.bundle import RunBundle, RunResult
from models.common import Intent, RunStatus
from models.delivery import Delivery, NewDelivery
from models.invocation import EvidenceStatus, LifecycleStatus, Projection, ToolInvocation
from models.run import LlmAttempt, RunEvent, RunHead, RunRecord, StalledRun
from models.state import NextStep
from models.token import ApiToken
from pipeline.store.batches import PAGE
from pipeline.store.deliveries import EndOutcome
from pipeline.store.leases import LeaseOutcome

Capability = Literal["server"]
"""What a backend can do beyond the interface: `server`, its database is a server reached over
connections that can be refused or lost (PostgreSQL; SQLite is a file in the process)."""


class AttemptJournal(Protocol):
    """Where attempts of remote models are written as they happen, one row each
    (`pipeline.run.attempts` writes through it; every `RunStore` is one)."""

    def begin_attempt(
        self, run_id: str, *, role: str, cycle: int, prompt_name: str, prompt_version: str,
        input_sha256: str, model: str,
    ) -> int:
        """Insert an `in_flight` attempt row before its request is sent; its number, one
        above the highest stored for (run, role, cycle). RunNotFoundError without the run."""
        ...

    def end_attempt(
        self, run_id: str, role: str, cycle: int, number: int, *, outcome: str,
        input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, latency_ms: float = 0.0, cost_usd: float = 0.0,
        error_type: str | None = None, reply: str | None = None,
    ) -> bool:
        """Complete an in-flight (or abandoned) row with its outcome, usage and latency, and
        the accepted answer (`reply`, for an `ok`); False if there is no such open row
        (completed already). Its `created_at` becomes the time it ended, as for rows a commit
        writes: `created_at - latency_ms` is when the request went out."""
        ...

    def answered(self, run_id: str, *, role: str, cycle: int, input_sha256: str) -> str | None:
        """The accepted answer of an earlier attempt of this call (same run, role, cycle and
        input bytes), if one was journaled: a copy of a node whose worker died after the
        answer came back, before its commit, reuses it instead of calling the model again."""
        ...


class RunStore(AttemptJournal, Protocol):
    """Runs, tool invocations, events, model attempts, node leases, re-verification batches and
    API tokens, as the contracts of `models/` (no row ever leaves a store)."""

    capabilities: frozenset[Capability]
    """What this backend can do beyond the interface (see `Capability`)."""

    # -- runs and a node's reads and commits -----------------------------------------------------

    def create_run(
        self,
        *,
        tenant_id: str,
        query: str,
        intent: Intent,
        session_id: str | None = None,
        run_id: str | None = None,
        origin: str = "run",
        origin_run_id: str | None = None,
        executor_output_raw: str | None = None,
        status: RunStatus = RunStatus.PENDING,
        source: str | None = None,
        state: dict[str, Any] | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
        deadline_s: float | None = None,
        trace_id: str | None = None,
    ) -> str:
        """Insert a run of `tenant_id` at version 0 and return its id (a uuid4 hex when none
        is given); InputError for a tenant id `check_tenant_id` refuses. `trace_id`: the
        run's trace in Verity's own tracing, when it is on.

        The run must end within `deadline_s` seconds (default: the store's `run_deadline_s`),
        else the reconciler ends it FAILED."""
        ...

    def get_state(self, run_id: str, *, tenant_id: str
                  ) -> tuple[RunRecord, dict[str, Any] | None]:
        """The tenant's run and its runtime state document, read together; RunNotFoundError
        if the tenant has no such run."""
        ...

    def get_head(
        self, run_id: str, *, with_executor_output: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None]:
        """What a node needs on every task, in one read: the head, the state and, if asked,
        the raw Executor output."""
        ...

    def get_node_input(
        self, run_id: str, *, with_executor_output: bool = False, with_invocations: bool = False
    ) -> tuple[RunHead, dict[str, Any] | None, str | None, list[ToolInvocation]]:
        """The head, the state, the raw Executor output and the invocations a node asks for,
        read together."""
        ...

    def commit_node(
        self,
        run_id: str,
        *,
        expected_version: int,
        node: str,
        state: dict[str, Any],
        status: RunStatus | None = None,
        evidence_retry_count: int | None = None,
        executor_output_raw: str | None = None,
        events: Sequence[tuple[str, str, dict[str, Any]]] = (),
        attempts: Sequence[LlmAttempt] = (),
        invocations: Sequence[ToolInvocation] = (),
        turn: int = 0,
    ) -> int:
        """Persist one node's output, its events, model attempts and requested tool calls
        (PROJECTING rows) in one transaction.

        The run must still be at `expected_version` and not terminal (StaleStateError
        otherwise): a redelivered or duplicate node loses here and changes nothing."""
        ...

    def get_tool_call(
        self, run_id: str, tool_call_id: str
    ) -> tuple[RunHead, ToolInvocation] | None:
        """A requested tool call with its run's head, in one read; None if not requested."""
        ...

    def complete_invocation(
        self,
        run_id: str,
        tool_call_id: str,
        *,
        status: LifecycleStatus,
        evidence_status: EvidenceStatus | None,
        projection: Projection | None,
        error: str | None = None,
        unless_cancelled: bool = False,
    ) -> bool:
        """Move a PROJECTING call to READY or ERROR; False if it was already completed (or,
        with `unless_cancelled`, if its run was cancelled: the late result is not kept)."""
        ...

    def list_invocations(self, run_id: str) -> list[ToolInvocation]:
        """The run's tool calls in insertion order."""
        ...

    def advance(
        self,
        run_id: str,
        *,
        expected_version: int,
        node: str | None = None,
        status: RunStatus | None = None,
        evidence_retry_count: int | None = None,
    ) -> int:
        """Move a non-terminal run at `expected_version` on; return its new version.

        None leaves a field unchanged. StaleStateError if the run is at another version or
        already terminal; RunNotFoundError if it does not exist."""
        ...

    def finalize(
        self, run_id: str, result: RunResult, *, expected_version: int | None = None,
        deliveries: Sequence[NewDelivery] = (),
    ) -> bool:
        """Release the outcome, append a finalize/completed event and enqueue `deliveries`
        (PENDING, due now), in one transaction.

        False, and nothing written, if the run is already terminal (a redelivery)."""
        ...

    def cancel_run(self, run_id: str, *, reason: str = "cancel requested",
                   node: str | None = None) -> bool:
        """End a non-terminal run as CANCELLED, with an event (of `node`, else the run's last
        node); False if already terminal."""
        ...

    def request_cancel(self, run_id: str, *, tenant_id: str) -> bool:
        """Flag the tenant's run for cancellation; False if it is already terminal,
        RunNotFoundError if the tenant has no such run."""
        ...

    def is_cancel_requested(self, run_id: str) -> bool:
        """Whether cancellation was requested for the run."""
        ...

    def save_verified_run(
        self,
        *,
        tenant_id: str,
        bundle: RunBundle,
        result: RunResult,
        events: list[tuple[str, str, dict[str, Any]]],
        attempts: list[LlmAttempt],
    ) -> str:
        """Store a `verity verify` outcome as a new finalized run of `tenant_id`; all of it or
        nothing. A bundle with an `imported` section keeps it (`RunRecord.imported`, and the
        bundle `to_bundle` gives back) and is of origin `import`; any other, `verify`."""
        ...

    def get_run(self, run_id: str, *, tenant_id: str) -> RunRecord:
        """The tenant's run as a contract; RunNotFoundError if there is none, or it is another
        tenant's (the same error: a run id tells another tenant nothing)."""
        ...

    def list_runs(
        self,
        *,
        tenant_id: str,
        limit: int = 20,
        session_id: str | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[RunRecord]:
        """The tenant's runs, newest first, optionally of one session and in some statuses."""
        ...

    def previous_turn(self, tenant_id: str, session_id: str) -> RunRecord | None:
        """The latest DIAGNOSIS run of the tenant's session that ended SUCCESS, if any: a
        session id is the tenant's own, another tenant's session of that name is another.

        Fallback, failed and cancelled runs are never a previous turn."""
        ...

    def to_bundle(self, run_id: str, *, tenant_id: str) -> RunBundle:
        """The tenant's run as a bundle (`verity export`); StoreError if it has no Executor
        output, RunNotFoundError if the tenant has no such run."""
        ...

    def events_since(
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int | None = None
    ) -> list[RunEvent]:
        """The tenant's run's events with a seq above `seq`, ascending (at most `limit` of
        them); RunNotFoundError if the tenant has no such run."""
        ...

    def follow(
        self, run_id: str, seq: int = 0, *, tenant_id: str, limit: int = 500
    ) -> tuple[RunStatus, list[RunEvent]]:
        """The tenant's run's status and its events with a seq above `seq` (at most `limit`),
        in one statement: a terminal status read here comes with every event written before
        it. RunNotFoundError if the tenant has no such run."""
        ...

    def list_attempts(self, run_id: str) -> list[LlmAttempt]:
        """The run's own model attempts in the order they were recorded (a re-verification's
        are its batch's)."""
        ...

    def ping(self) -> None:
        """One round trip to the database; StoreUnavailableError if it cannot be reached."""
        ...

    # -- the reconciler --------------------------------------------------------------------------

    def find_stalled(
        self, *, older_than_s: float, limit: int, now: datetime | None = None
    ) -> list[StalledRun]:
        """PENDING or RUNNING runs whose last change is more than `older_than_s` seconds old
        and whose node lease is absent or expired, oldest first, with their stored next step."""
        ...

    def claim_stalled(
        self, run_id: str, *, version: int, updated_at: datetime, step: NextStep | None = None
    ) -> bool:
        """Claim a stalled run for one re-send: touch it (`updated_at`, `reconcile_count`)
        and append a reconcile/resent event, only if it is still at `version` and
        `updated_at` with no live lease. Of several reconcilers claiming one stall, exactly
        one gets True. `step` is the stored next step for the event (read if not given)."""
        ...

    def fail_overdue(self, *, now: datetime | None = None, limit: int = 100) -> list[str]:
        """End non-terminal runs past their deadline as FAILED (RUN_DEADLINE_EXCEEDED), each
        with a reconcile/failed event; the ids of those this call ended."""
        ...

    def fail_run(self, run_id: str, *, version: int, reason: str, error: str) -> bool:
        """End a non-terminal run at `version` FAILED with a reconcile/failed event
        ({reason, error}); False, and nothing written, if it moved on or ended."""
        ...

    def delete_run(self, run_id: str) -> bool:
        """Remove a run that never started (PENDING at version 0, e.g. its submit never
        reached the broker), with its events; False if there is none or it has started."""
        ...

    # -- notification deliveries -----------------------------------------------------------------

    def claim_delivery(self, delivery_id: str, *, owner: str, lease_s: float,
                       now: datetime | None = None) -> tuple[Delivery, int] | None:
        """Take a due PENDING delivery, or a SENDING one whose claim expired, for one attempt
        of `lease_s` seconds, writing its `in_flight` attempt row (an expired claim's becomes
        `abandoned`); the delivery and the attempt's number, or None. Of several claimers
        exactly one gets it. An expired claim on the last attempt ends the delivery FAILED."""
        ...

    def end_delivery_attempt(
        self, delivery_id: str, number: int, *, owner: str, outcome: EndOutcome,
        status_code: int | None = None, error: str | None = None,
        retry_at: datetime | None = None, now: datetime | None = None,
    ) -> Delivery | None:
        """Record how `owner`'s attempt `number` ended: DELIVERED, PENDING until `retry_at`
        (`retry`), or FAILED; None, and nothing written, if the claim is no longer theirs."""
        ...

    def list_deliveries(self, run_id: str, *, tenant_id: str) -> list[Delivery]:
        """The tenant's run's deliveries with their attempts, oldest first; RunNotFoundError
        if the tenant has no such run."""
        ...

    def get_delivery(self, delivery_id: str) -> Delivery | None:
        """One delivery with its attempts, or None."""
        ...

    def due_deliveries(self, *, older_than_s: float, limit: int,
                       now: datetime | None = None) -> list[str]:
        """Ids of deliveries to re-drive: PENDING and due for over `older_than_s` seconds, or
        SENDING with an expired claim."""
        ...

    # -- node leases and the attempt journal -----------------------------------------------------

    def acquire_lease(
        self, run_id: str, *, version: int, owner: str, ttl_s: float
    ) -> LeaseOutcome:
        """Take the run's node lease for `ttl_s` seconds, in one conditional UPDATE: only if
        the run is at `version`, not terminal, not cancel requested, and its lease is free,
        expired or already `owner`'s. Otherwise the outcome says why; RunNotFoundError if
        there is no such run."""
        ...

    def renew_leases(self, owner: str, run_ids: Collection[str], ttl_s: float) -> set[str]:
        """Extend `owner`'s leases of `run_ids` by `ttl_s` seconds, in one statement; the ids
        whose lease is no longer `owner`'s or whose run ended or was cancelled (their node
        copies must stop)."""
        ...

    def release_lease(self, run_id: str, owner: str) -> bool:
        """Give the lease back; False if it was not `owner`'s (lost, or cleared by a commit)."""
        ...

    def abandon_in_flight(self, run_id: str) -> int:
        """Mark the run's `in_flight` rows `abandoned` (their node copy is gone: call it once
        the run's lease is yours); how many. A late answer still completes such a row."""
        ...

    # -- batch re-verification -------------------------------------------------------------------

    def iter_runs(
        self, *, tenant_id: str, selection: Selection, terminal_only: bool = False,
        page: int = PAGE, after: tuple[datetime, str] | None = None, summary: bool = False,
    ) -> Iterator[RunRecord]:
        """The tenant's runs that `selection` picks, newest first, read in keyset pages (never
        all at once); `terminal_only` keeps ended diagnosis runs only (what a batch
        re-judges). `after` = (created_at, run_id) of a run already seen starts past it.
        `summary` reads neither the answer nor the self-evaluation (None in the records)
        unless the selection filters by the audit; each page is one query either way."""
        ...

    def create_batch(
        self, *, batch_id: str, tenant_id: str, selection: Selection, provider: str,
        message_batches: bool, chunk_size: int,
    ) -> BatchRecord:
        """A PENDING batch with one item per selected ended diagnosis run, written page by
        page; the batch's total is set last, in the same transaction."""
        ...

    def get_batch(self, batch_id: str, *, tenant_id: str | None = None) -> BatchRecord:
        """The batch; BatchNotFoundError if it is not there (or not the tenant's)."""
        ...

    def start_batch(self, batch_id: str) -> bool:
        """PENDING -> RUNNING (False if it was not PENDING: started, ended or cancelled)."""
        ...

    def cancel_batch(self, batch_id: str, *, tenant_id: str) -> bool:
        """End a live batch CANCELLED: no new item starts (items being judged may still land).
        False if it had already ended; BatchNotFoundError if the tenant has no such batch."""
        ...

    def reopen_batch(self, batch_id: str, *, tenant_id: str) -> BatchRecord:
        """`--resume`: a batch with items left goes back to RUNNING (a cancelled one too)."""
        ...

    def stalled_batches(self, *, older_than_s: float, now: datetime | None = None
                        ) -> list[BatchRecord]:
        """RUNNING batches with items left and no progress for `older_than_s`: their chunks'
        messages were lost (a worker died, Redis restarted) and are re-sent."""
        ...

    def claim_stalled_batch(self, batch_id: str, *, updated_at: datetime) -> bool:
        """Take the re-send of a stalled batch once among several sweepers: True for the one
        whose conditional update moved its clock."""
        ...

    def delete_batch(self, batch_id: str) -> None:
        """Remove a batch and its items (a batch whose start could not be sent)."""
        ...

    def pending_items(self, batch_id: str, *, start: int, end: int) -> list[tuple[int, str]]:
        """(seq, run_id) of the chunk's items still PENDING, in order."""
        ...

    def pending_ranges(self, batch_id: str) -> list[tuple[int, int]]:
        """The chunk ranges [start, end) that still hold a PENDING item."""
        ...

    def load_for_judging(
        self, run_ids: Sequence[str], *, tenant_id: str
    ) -> dict[str, tuple[RunRecord, RunBundle] | str]:
        """Each run as stored and as a bundle (its invocations, its raw Executor output), in two
        queries; a run that cannot be re-judged maps to a one-line reason instead.

        Only the columns a re-judgement needs are read (not the working state, but its retry
        context; not the stored answer), as plain rows; the large JSON documents (the
        self-evaluation, each projection) are read as text and parsed by their own models in
        one pass (no intermediate Python objects): this is most of a batch item's store time."""
        ...

    def record_items(
        self, batch_id: str, results: Sequence[ItemResult], attempts: Sequence[LlmAttempt]
    ) -> int:
        """Write results onto their items if still PENDING, each item's attempts with it (tied
        to the batch), move the counters by what landed and end the batch if it is complete.
        Returns how many items this call judged (0 for a re-sent chunk)."""
        ...

    def iter_items(self, batch_id: str, *, tenant_id: str, page: int = PAGE
                   ) -> Iterator[ItemRecord]:
        """The batch's items in order, read in pages."""
        ...

    # -- API tokens ------------------------------------------------------------------------------

    def create_token(self, *, token_id: str, tenant_id: str, name: str, secret_sha256: str
                     ) -> ApiToken:
        """Store a token of `tenant_id` by its secret's sha256; InputError for a bad tenant id
        or name."""
        ...

    def token_by_secret_hash(self, secret_sha256: str, *, now: datetime | None = None
                             ) -> ApiToken | None:
        """The token with this secret hash if it is not revoked (None otherwise), its
        `last_used_at` moved to now when it was older than `TOUCH_EVERY`."""
        ...

    def list_tokens(self, *, tenant_id: str | None = None) -> list[ApiToken]:
        """Every token (of one tenant, given one), oldest first, revoked ones included."""
        ...

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a token: every later request with it is refused. False if there is no such
        token or it was revoked already."""
        ...

    # -- alert groups ----------------------------------------------------------------------------

    def claim_alert_group(
        self, *, tenant_id: str, dedupe_key: str, group_key: str, alertname: str,
        window_s: float, max_per_hour: int, now: datetime | None = None,
    ) -> tuple[AlertOutcome, AlertGroup]:
        """Decide what a firing group does, in one transaction: `started` (a new record,
        its run to be created and attached by the caller), `skipped` (a new record: the
        tenant's groups started in the last hour reach `max_per_hour`) or `deduplicated`
        (the group's record is younger than `window_s` and neither resolved nor skipped:
        only its duplicate count moves). Of concurrent claims of one group exactly one
        starts it (insert-or-nothing on the unique tenant and `dedupe_key`)."""
        ...

    def attach_alert_run(self, receipt_id: str, *, run_id: str, alert: RunAlert) -> None:
        """Tie the started record to its run, and the alert to the run (`RunRecord.alert`)."""
        ...

    def release_alert_group(self, receipt_id: str) -> bool:
        """Remove a record whose run could not be created (the notification is retried);
        False if it is gone or has a run."""
        ...

    def resolve_alert_group(self, *, tenant_id: str, group_key: str,
                            now: datetime | None = None) -> AlertGroup | None:
        """Record a resolved notification on the group's latest record and its run (once:
        the first resolved time is kept); None if the tenant has no record of the group."""
        ...

    def list_alert_groups(self, *, tenant_id: str, limit: int = 50) -> list[AlertGroup]:
        """The tenant's alert group records, newest first."""
        ...

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        """Close every pooled connection."""
        ...

    def __enter__(self) -> RunStore:
        ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        ...
