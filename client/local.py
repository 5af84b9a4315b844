"""The producer API for the web app: submit, get, wait, cancel, events since a sequence number.

    # VERITY_BROKER_URL, VERITY_DATABASE_URL; the tenant given, else VERITY_TENANT
    client = VerityClient.from_env(tenant="team-payments")
    run_id = client.submit("Why is checkout-service returning 500s?", session_id="sre-42",
                           source="prod")   # a [sources.prod] of the sources file
    for event in client.events(run_id, after=0): ...
    record = client.wait(run_id, timeout=60)
    client.cancel(run_id)

A client is bound to one tenant (the producer's credentials) when it is made. The runs it
submits are that tenant's; sessions and previous turns are per tenant (another tenant's session
"sre-42" is another session); `get`, `events`, `wait` and `cancel` see only the tenant's runs,
and another tenant's run id is refused with exactly the error of an unknown one
(RunNotFoundError), so it tells nothing about whether that run exists.

Or, without this module, enqueue by name: `app.send_task("verity.run.coordinate", (run_id, 0))`
after creating the run with `Runtime.submit(query, tenant_id=...)`.

Producer-side failures are Verity errors with one-line messages, raised before anything is
written or with the row removed again: a tenant id that is missing (ConfigurationError) or
malformed (InputError), a source that is not one (UnknownSourceError, an InputError naming the
known ones), a `data_source` that is missing or not a scenario folder (InputError), a broken
sources file (ConfigurationError), a database that cannot be reached (StoreUnavailableError),
a broker that cannot be reached (BrokerUnavailableError: the just-created run is deleted), a
broker configured without the workers' shared database (ConfigurationError).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from client.http import HttpVerityClient
from client.wait import RunTimeoutError, wait_for_end
from models.batch import BatchRecord, Selection
from models.bundle import RunBundle
from models.check import CheckReport
from models.common import RunStatus
from models.delivery import Delivery
from models.run import RunEvent, RunRecord
from models.state import RuntimeState
from pipeline.checks import check as check_answer
from pipeline.checks import result_of
from pipeline.checks import save as save_check
from pipeline.config import VeritySettings, check_settings
from pipeline.errors import (
    BatchNotFoundError,
    BrokerUnavailableError,
    ConfigurationError,
    InputError,
    StoreError,
    VerityError,
)
from pipeline.factory import batch_judges, claude_extractor
from pipeline.ids import check_batch_id, check_tenant_id
from pipeline.importers.files import parse_files
from pipeline.importers.formats import parse_transcript
from pipeline.importers.report import check_report
from pipeline.reverify import build_report
from pipeline.run.runtime import Runtime
from pipeline.sources.resolve import resolve_source
from tasks.producer import ping_broker, revoke_pending, send_batch, send_run
from tasks.services import get_runtime

logger = logging.getLogger(__name__)

PROVIDERS = ("offline", "anthropic")
DEFAULT_CHUNK_SIZE = 50
MAX_CHUNK_SIZE = 1000

__all__ = ["DEFAULT_CHUNK_SIZE", "MAX_CHUNK_SIZE", "PROVIDERS", "RunTimeoutError",
           "VerityClient", "check_settings"]


class VerityClient:
    """Enqueue one tenant's runs and read them back; state comes from the store, never from
    results."""

    def __init__(self, runtime: Runtime, *, tenant: str) -> None:
        """Act as `tenant` over this runtime's store and agents (submit routes the intent with
        them); InputError for a tenant id `check_tenant_id` refuses."""
        self.runtime = runtime
        self.tenant = check_tenant_id(tenant)

    @classmethod
    def from_env(cls, tenant: str | None = None) -> VerityClient:
        """A client of `tenant` (else VERITY_TENANT) over the VERITY_* configured database and
        broker; ConfigurationError if neither names a tenant."""
        settings = VeritySettings()
        check_settings(settings)
        chosen = tenant if tenant is not None else settings.tenant or None
        if chosen is None:
            raise ConfigurationError(
                "no tenant: pass VerityClient.from_env(tenant=...) or set VERITY_TENANT")
        return cls(get_runtime(), tenant=check_tenant_id(chosen))

    @staticmethod
    def from_url(url: str, token: str, *, timeout: float = 30.0) -> HttpVerityClient:
        """The same producer API over `verity serve` at `url`, as the token's tenant: the
        same methods, return types and errors (`client.http`)."""
        return HttpVerityClient(url, token, timeout=timeout)

    def submit(
        self, query: str, *, session_id: str | None = None, source: str | None = None,
        at: datetime | None = None, data_source: str | None = None,
        deadline_s: float | None = None, origin: str = "run",
    ) -> str:
        """Create the tenant's run and enqueue its coordinator; returns the run id at once.
        `source` names where its tools read: a source of the sources file (`prod`), a shipped
        scenario (`scenario:NAME`) or a scenario folder; `data_source` is a scenario folder
        (the older form). Neither: the sources file's `default_source`. `at` is the time the
        question is about (default now; a scenario's own time for scenarios): a configured
        source is pinned at it, so every tool call of the run sees the same windows.
        `session_id` names one of the tenant's sessions: its latest successful diagnosis is
        the previous turn. The run must end within `deadline_s` seconds (default
        `VERITY_RUN_DEADLINE_S`). `origin`: what started it (`alert`: a firing alert group,
        which notification targets with `when = "alert"` announce).

        InputError (nothing written) for an unknown source or one the runtime cannot load;
        ConfigurationError for a broken sources file; BrokerUnavailableError (the run deleted
        again) if the broker cannot be reached.
        """
        stored = self.check_source(source, data_source=data_source, at=at)
        if deadline_s is not None and not deadline_s > 0:
            raise InputError(f"deadline_s must be a positive number of seconds, not {deadline_s}")
        run_id = self.runtime.submit(query, tenant_id=self.tenant, session_id=session_id,
                                     source=stored, deadline_s=deadline_s, origin=origin)
        try:
            send_run(run_id)
        except BrokerUnavailableError:
            if self._started_anyway(run_id):
                return run_id  # the message did go out before the error
            raise
        return run_id

    def check_source(self, source: str | None, *, data_source: str | None = None,
                     at: datetime | None = None) -> str | None:
        """The source reference to store, checked before anything is written (InputError,
        one line): a scenario folder as an absolute path, `scenario:NAME`, or a configured
        name (backends pinned at `at`, default now: `prod@2026-12-01T17:00:00Z`). A runtime
        with a source loader of its own (VERITY_RUNTIME_FACTORY) is asked to load it instead."""
        loader = self.runtime.source_loader
        return resolve_source(source, data_source=data_source, at=at, loader=loader)

    def _started_anyway(self, run_id: str) -> bool:
        """Delete a run whose first message could not be sent; True if it is not there to
        delete because it has started (the publish went out before it raised)."""
        store = self.runtime.store
        try:
            if store.delete_run(run_id):
                return False
            record = store.get_run(run_id, tenant_id=self.tenant)
        except StoreError as exc:  # left PENDING: the reconciler sends it once it can
            logger.warning("run %s not removed after its publish failed: %s", run_id, exc)
            return False
        return record.version > 0

    def get(self, run_id: str) -> RunRecord:
        """The tenant's run as stored now; RunNotFoundError if the tenant has no such run."""
        return self.runtime.store.get_run(run_id, tenant_id=self.tenant)

    def deliveries(self, run_id: str) -> list[Delivery]:
        """The tenant's run's notification deliveries with their attempts; RunNotFoundError
        if the tenant has no such run."""
        return self.runtime.store.list_deliveries(run_id, tenant_id=self.tenant)

    def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        """The tenant's run's orchestration events with seq > after."""
        return self.runtime.store.events_since(run_id, after, tenant_id=self.tenant)

    def wait(self, run_id: str, *, timeout: float = 120.0, poll: float = 0.05) -> RunRecord:
        """Block until the run is terminal; RunTimeoutError after `timeout` seconds."""
        return wait_for_end(self.get, run_id, timeout=timeout, poll=poll)

    # -- batch re-verification -------------------------------------------------------------

    def reverify(
        self, selection: Selection | None = None, *, provider: str | None = None,
        message_batches: bool = False, chunk_size: int = DEFAULT_CHUNK_SIZE,
        batch_id: str | None = None,
    ) -> BatchRecord:
        """Create a batch over the tenant's ended runs that `selection` picks and enqueue it;
        returns the batch at once (PENDING). Each item re-runs gatekeep, verify and compose
        on the run's stored invocations and Executor output with today's prompts, models and
        rules; the stored runs are never written (results go to the batch's items).

        InputError for a bad provider, chunk size or batch id (or one that exists);
        ConfigurationError for `anthropic` without a key; BrokerUnavailableError (the batch
        deleted again) if the broker cannot be reached."""
        provider = self._provider(provider)
        if message_batches and provider != "anthropic":
            raise InputError("Message Batches need --provider anthropic")
        if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
            raise InputError(f"chunk size must be between 1 and {MAX_CHUNK_SIZE}")
        batch_id = check_batch_id(batch_id) if batch_id else uuid.uuid4().hex
        store = self.runtime.store
        try:
            store.get_batch(batch_id)
        except BatchNotFoundError:
            pass
        else:
            raise InputError(f"batch {batch_id} exists: resume it with --resume {batch_id}")
        batch = store.create_batch(batch_id=batch_id, tenant_id=self.tenant,
                                   selection=selection or Selection(), provider=provider,
                                   message_batches=message_batches, chunk_size=chunk_size)
        try:
            send_batch(batch_id)
        except BrokerUnavailableError:
            store.delete_batch(batch_id)
            raise
        return batch

    def _provider(self, provider: str | None) -> str:
        """`provider`, else the configured one; InputError for an unknown one,
        ConfigurationError for `anthropic` without a key."""
        provider = provider or self.runtime.settings.resolved_provider()
        if provider not in PROVIDERS:
            raise InputError(f"provider must be one of {', '.join(PROVIDERS)}, not {provider!r}")
        if provider == "anthropic" and not self.runtime.settings.anthropic_api_key:
            raise ConfigurationError("--provider anthropic needs ANTHROPIC_API_KEY")
        return provider

    def resume(self, batch_id: str) -> BatchRecord:
        """Send a batch's items left again (after a cancel, or workers that died); items
        already judged are never judged twice."""
        batch = self.runtime.store.reopen_batch(batch_id, tenant_id=self.tenant)
        if batch.pending:
            send_batch(batch_id)
        return batch

    def batch(self, batch_id: str) -> BatchRecord:
        """The tenant's batch as stored now (BatchNotFoundError otherwise)."""
        return self.runtime.store.get_batch(batch_id, tenant_id=self.tenant)

    def cancel_batch(self, batch_id: str) -> bool:
        """Stop a batch: no new item starts; False if it had already ended."""
        return self.runtime.store.cancel_batch(batch_id, tenant_id=self.tenant)

    def batch_report(self, batch_id: str) -> dict[str, Any]:
        """The batch's report (`pipeline.reverify.Report.as_json`) with the batch itself."""
        batch = self.batch(batch_id)
        report = build_report(self.runtime.store.iter_items(batch_id, tenant_id=self.tenant))
        return {"batch": batch.model_dump(mode="json"), **report.as_json()}

    def cancel(self, run_id: str) -> bool:
        """Cancel: no new node or tool starts, late results are discarded, queued tasks are
        revoked (never terminated). False if the run had already ended; RunNotFoundError if
        the tenant has no such run."""
        record, raw = self.runtime.store.get_state(run_id, tenant_id=self.tenant)
        cancelled = self.runtime.cancel(run_id, tenant_id=self.tenant)
        if raw is not None:
            revoke_pending(run_id, record.version, RuntimeState.model_validate(raw).next)
        return cancelled


    # -- other agents' answers ----------------------------------------------------------------

    def check(self, *, format: str, transcript: str | None = None, answer: str | None = None,
              evidence: Sequence[tuple[str, str]] = (), question: str | None = None,
              provider: str | None = None) -> CheckReport:
        """Check another agent's answer, claim by claim, and store the check as one of the
        tenant's runs (origin `import`; its id is the report's `run_id`). `format` is
        `anthropic`, `openai` or `otel` with the `transcript` text, or `files` with the
        `answer` text and `evidence` as (file name, text) pairs. The Verifier and Composer are
        `provider`'s (default the configured one); with `anthropic` the claims are the Claude
        extractor's (the deterministic splitter's, logged as a warning and recorded in the
        stored run, when its reply is not usable). TranscriptError (an InputError, one line)
        for an input that cannot be imported; nothing is stored then."""
        chosen = self._provider(provider)
        if format == "files":
            if answer is None:
                raise InputError("format files needs the answer's text")
            imported = parse_files(("answer", answer), list(evidence))
        else:
            if transcript is None:
                raise InputError(f"format {format} needs the transcript's text")
            imported = parse_transcript(transcript, format)
        settings = self.runtime.settings
        verifier, composer = batch_judges(settings, chosen)
        extractor = claude_extractor(settings) if chosen == "anthropic" else None
        checked = check_answer(imported, verifier=verifier, composer=composer,
                               question=question, settings=settings, extractor=extractor)
        if checked.extraction is not None and checked.extraction.fallback:
            logger.warning("check %s: %s", checked.report.run_id, checked.extraction.note)
        save_check(self.runtime.store, checked, tenant_id=self.tenant)
        return checked.report

    def check_report(self, run_id: str) -> CheckReport:
        """The check report of one of the tenant's stored imported runs (InputError for a run
        that is not one; RunNotFoundError if the tenant has no such run)."""
        record = self.get(run_id)
        if record.origin != "import" or record.self_evaluation is None:
            raise InputError(f"run {run_id} is not an imported answer's check")
        return check_report(self.bundle(run_id), result_of(record))

    # -- reads for the HTTP API ---------------------------------------------------------------

    def runs(self, selection: Selection | None = None, *,
             after: tuple[datetime, str] | None = None) -> list[RunRecord]:
        """The tenant's runs `selection` picks, newest first (at most `selection.limit`),
        starting past `after` = (created_at, run_id) of the last run of a previous page."""
        chosen = selection or Selection(limit=20)
        return list(self.runtime.store.iter_runs(tenant_id=self.tenant, selection=chosen,
                                                 after=after))

    def bundle(self, run_id: str) -> RunBundle:
        """The tenant's run as a bundle `verity verify` accepts (`verity export`)."""
        return self.runtime.store.to_bundle(run_id, tenant_id=self.tenant)

    def follow(self, run_id: str, *, after: int = 0) -> tuple[RunStatus, list[RunEvent]]:
        """The run's status and its events with seq > after, read together in one statement
        (a terminal status comes with every event written before it)."""
        return self.runtime.store.follow(run_id, after, tenant_id=self.tenant)

    def check_ready(self) -> dict[str, str | None]:
        """Whether the database and the broker answer: each is None when it does, else the
        one-line reason it does not."""
        found: dict[str, str | None] = {"database": None, "broker": None}
        try:
            self.runtime.store.ping()
        except VerityError as exc:
            found["database"] = str(exc)
        try:
            ping_broker()
        except VerityError as exc:
            found["broker"] = str(exc)
        return found
