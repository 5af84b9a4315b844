"""The RunStore conformance suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.exc import IntegrityError

from models.common import FallbackType, Intent, RunStatus, Verdict
from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    ToolInvocation,
)
from pipeline.errors import DuplicateToolCallError, RunNotFoundError, StaleStateError, StoreError
from pipeline.store import RunStore
from tests.store.samples import (
    QUERY,
    make_attempt,
    make_bundle,
    make_invocation,
    make_projection,
    make_result,
)
from tests.store_rows import (
    add_invocation,
    append_event,
    executor_output,
    record_attempt,
    set_executor_output,
)

TENANT = "team-a"
"""The owner of this module's runs."""


@contextmanager
def _refused_finalize_events(store: RunStore) -> Iterator[None]:
    """A real fault: while open, the database refuses every `finalize` event row (a trigger
    raising an integrity error), the way a full disk or a broken constraint would."""
    if store.engine.dialect.name == "sqlite":
        create = ["CREATE TRIGGER refuse_finalize BEFORE INSERT ON run_event "
                  "WHEN NEW.node = 'finalize' BEGIN SELECT RAISE(ABORT, 'disk full'); END"]
        drop = ["DROP TRIGGER refuse_finalize"]
    else:
        create = ["CREATE FUNCTION refuse_finalize() RETURNS trigger LANGUAGE plpgsql AS $$ "
                  "BEGIN RAISE EXCEPTION 'disk full' USING ERRCODE = 'check_violation'; END $$",
                  "CREATE TRIGGER refuse_finalize BEFORE INSERT ON run_event FOR EACH ROW "
                  "WHEN (NEW.node = 'finalize') EXECUTE FUNCTION refuse_finalize()"]
        drop = ["DROP TRIGGER refuse_finalize ON run_event", "DROP FUNCTION refuse_finalize()"]
    with store.engine.begin() as connection:
        for statement in create:
            connection.exec_driver_sql(statement)
    try:
        yield
    finally:
        with store.engine.begin() as connection:
            for statement in drop:
                connection.exec_driver_sql(statement)


def _is_utc(value: datetime | None) -> bool:
    return value is not None and value.utcoffset() == timedelta(0)


# -- runs -----------------------------------------------------------------------------------


def test_create_run_then_get_it(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS,
                              session_id="s1")
    record = store.get_run(run_id, tenant_id=TENANT)
    assert len(run_id) == 32 and int(run_id, 16) >= 0
    assert (record.run_id, record.query, record.intent) == (run_id, QUERY, Intent.DIAGNOSIS)
    assert (record.status, record.version, record.session_id) == (RunStatus.PENDING, 0, "s1")
    assert (record.origin, record.origin_run_id, record.node) == ("run", None, None)
    assert record.cancel_requested is False and record.evidence_retry_count == 0
    assert record.final_answer is None and record.self_evaluation is None
    assert record.finished_at is None


def test_create_run_with_given_id_refuses_a_taken_id(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.KNOWLEDGE_QUERY,
                              run_id="run-1")
    with pytest.raises(StoreError, match="already exists"):
        store.create_run(tenant_id=TENANT, query="other", intent=Intent.DIAGNOSIS, run_id="run-1")
    assert run_id == "run-1"
    assert store.get_run("run-1", tenant_id=TENANT).query == QUERY


def test_get_run_of_unknown_id_raises(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError):
        store.get_run("missing", tenant_id=TENANT)


def test_list_runs_newest_first_with_filters(store: RunStore) -> None:
    ids = [
        store.create_run(tenant_id=TENANT, query=f"q{i}", intent=Intent.DIAGNOSIS,
                         session_id="a") for i in range(3)
    ]
    other = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS, session_id="b")
    store.advance(ids[1], expected_version=0, status=RunStatus.RUNNING)

    assert [r.run_id for r in store.list_runs(tenant_id=TENANT)] == [other, *reversed(ids)]
    assert [r.run_id for r in store.list_runs(tenant_id=TENANT, limit=2)] == [other, ids[2]]
    assert [r.run_id for r in store.list_runs(tenant_id=TENANT,
                                              session_id="a")] == list(reversed(ids))
    running = store.list_runs(tenant_id=TENANT, statuses=[RunStatus.RUNNING])
    assert [r.run_id for r in running] == [ids[1]]
    assert store.list_runs(tenant_id=TENANT, session_id="b", statuses=[RunStatus.RUNNING]) == []


# -- tool invocations ---------------------------------------------------------------------


def test_duplicate_tool_call_id_raises_and_keeps_the_first_row(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    first = make_invocation("toolu_01")
    add_invocation(store, run_id, first)
    add_invocation(store, run_id, make_invocation("toolu_02"))
    intruder = ToolInvocation(
        tool_call_id="toolu_01",
        tool_name="query_metrics",
        arguments={"metric": "latency"},
        status=LifecycleStatus.ERROR,
        evidence_status=EvidenceStatus.ERROR,
        error="boom",
    )
    with pytest.raises(DuplicateToolCallError) as caught:
        add_invocation(store, run_id, intruder, turn=3)
    assert (caught.value.run_id, caught.value.tool_call_id) == (run_id, "toolu_01")
    assert store.list_invocations(run_id) == [first, make_invocation("toolu_02")]
    # Ids are unique per run, not globally.
    other = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    add_invocation(store, other, intruder)
    assert store.list_invocations(other) == [intruder]


def test_add_invocation_to_unknown_run_raises(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError):
        add_invocation(store, "missing", make_invocation("toolu_01"))


def test_complete_invocation_is_idempotent(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    add_invocation(store, run_id, make_invocation("toolu_01", status=LifecycleStatus.PROJECTING))
    projection = make_projection(hits=[{"message": "OOMKilled"}])
    assert store.complete_invocation(
        run_id,
        "toolu_01",
        status=LifecycleStatus.READY,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        projection=projection,
    )
    redelivered = store.complete_invocation(
        run_id,
        "toolu_01",
        status=LifecycleStatus.ERROR,
        evidence_status=EvidenceStatus.ERROR,
        projection=None,
        error="late failure",
    )
    assert redelivered is False
    (stored,) = store.list_invocations(run_id)
    assert (stored.status, stored.evidence_status) == (
        LifecycleStatus.READY,
        EvidenceStatus.EVIDENCE_FOUND,
    )
    assert stored.projection == projection and stored.error is None


def test_complete_invocation_of_unknown_call_raises(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    kwargs = {"status": LifecycleStatus.READY, "evidence_status": None, "projection": None}
    with pytest.raises(StoreError, match="no tool call") as caught:
        store.complete_invocation(run_id, "toolu_nope", **kwargs)  # type: ignore[arg-type]
    assert not isinstance(caught.value, RunNotFoundError)
    with pytest.raises(RunNotFoundError):
        store.complete_invocation("missing", "toolu_nope", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="READY or ERROR"):
        store.complete_invocation(
            run_id,
            "toolu_nope",
            status=LifecycleStatus.PROJECTING,
            evidence_status=None,
            projection=None,
        )


def test_invocations_come_back_in_insertion_order(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    calls = [make_invocation(call_id) for call_id in ("toolu_c", "toolu_a", "toolu_b")]
    for turn, invocation in enumerate(calls):
        add_invocation(store, run_id, invocation, turn=turn)
    assert store.list_invocations(run_id) == calls
    empty = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    assert store.list_invocations(empty) == []
    with pytest.raises(RunNotFoundError):
        store.list_invocations("missing")


def test_projection_keeps_its_key_order(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    projection = make_projection(zeta={"b": 1, "a": 2}, alpha=[3, 2, 1], mid="x")
    invocation = ToolInvocation(
        tool_call_id="toolu_01",
        tool_name="search_logs",
        arguments={"z": 1, "a": 2},
        status=LifecycleStatus.READY,
        evidence_status=EvidenceStatus.EVIDENCE_FOUND,
        projection=projection,
    )
    add_invocation(store, run_id, invocation)
    (stored,) = store.list_invocations(run_id)
    assert stored.projection is not None
    assert stored.projection.model_dump_json() == projection.model_dump_json()
    assert list(stored.arguments) == ["z", "a"]


# -- events ---------------------------------------------------------------------------------


def test_events_are_numbered_per_run_and_paged(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    other = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    appended = [
        append_event(store, run_id, node=node, kind="started", payload={"i": i})
        for i, node in enumerate(["plan", "execute", "gatekeep", "verify"])
    ]
    append_event(store, other, node="plan", kind="started")
    assert [e.seq for e in appended] == [1, 2, 3, 4]
    assert store.events_since(run_id, tenant_id=TENANT) == appended
    assert store.events_since(run_id, 2, tenant_id=TENANT) == appended[2:]
    assert store.events_since(run_id, 1, limit=2, tenant_id=TENANT) == appended[1:3]
    assert store.events_since(run_id, 4, tenant_id=TENANT) == []
    (only,) = store.events_since(other, tenant_id=TENANT)
    assert (only.seq, only.payload) == (1, {})


def test_events_since_of_unknown_run_raises(store: RunStore) -> None:
    with pytest.raises(RunNotFoundError):
        store.events_since("missing", tenant_id=TENANT)
    with pytest.raises(RunNotFoundError):
        append_event(store, "missing", node="plan", kind="started")


def test_concurrent_appends_get_unique_consecutive_seqs(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    threads, per_thread = 6, 8
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def append(worker: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                append_event(store,
                    run_id, node="tool", kind="completed", payload={"w": worker, "i": i}
                )
        except BaseException as exc:  # reported below, in the test thread
            errors.append(exc)

    workers = [threading.Thread(target=append, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    events = store.events_since(run_id, tenant_id=TENANT)
    assert [e.seq for e in events] == list(range(1, threads * per_thread + 1))
    for w in range(threads):
        assert [e.payload["i"] for e in events if e.payload["w"] == w] == list(range(per_thread))


# -- model attempts -----------------------------------------------------------------------


def test_attempts_round_trip_every_field(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    plus_two = timezone(timedelta(hours=2))
    attempts = [
        make_attempt(run_id, number=1, outcome="invalid_output", error_type="ValidationError"),
        make_attempt(run_id, number=2,
                     created_at=datetime(2026, 11, 30, 14, 0, 1, tzinfo=plus_two)),
        make_attempt(run_id, role="composer", number=1, cycle=0, cost_usd=0.0, model="offline-x"),
    ]
    for attempt in attempts:
        record_attempt(store, attempt)
    stored = store.list_attempts(run_id)
    assert stored == attempts
    assert all(_is_utc(a.created_at) for a in stored)


def test_attempt_without_time_gets_one(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    before = datetime.now(UTC)
    record_attempt(store, make_attempt(run_id, created_at=None))
    (stored,) = store.list_attempts(run_id)
    assert stored.created_at is not None and stored.created_at >= before - timedelta(seconds=1)
    assert _is_utc(stored.created_at)


def test_duplicate_attempt_raises_and_keeps_the_first(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    first = make_attempt(run_id)
    record_attempt(store, first)
    with pytest.raises(StoreError, match="duplicate model attempt"):
        record_attempt(store, make_attempt(run_id, outcome="error", input_tokens=1))
    assert store.list_attempts(run_id) == [first]
    with pytest.raises(RunNotFoundError):
        record_attempt(store, make_attempt("missing"))


# -- state changes ------------------------------------------------------------------------


def test_advance_bumps_the_version_and_refuses_stale_ones(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    assert store.advance(run_id, expected_version=0, node="plan", status=RunStatus.RUNNING) == 1
    assert store.advance(run_id, expected_version=1, evidence_retry_count=1) == 2
    with pytest.raises(StaleStateError):
        store.advance(run_id, expected_version=1, node="verify")
    record = store.get_run(run_id, tenant_id=TENANT)
    assert (record.version, record.node, record.status) == (2, "plan", RunStatus.RUNNING)
    assert record.evidence_retry_count == 1
    assert record.updated_at is not None and record.created_at is not None
    assert record.updated_at >= record.created_at
    with pytest.raises(RunNotFoundError):
        store.advance("missing", expected_version=0)


def test_advance_to_a_terminal_status_then_nothing_moves(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    assert store.advance(run_id, expected_version=0, status=RunStatus.CANCELLED) == 1
    assert _is_utc(store.get_run(run_id, tenant_id=TENANT).finished_at)
    with pytest.raises(StaleStateError):
        store.advance(run_id, expected_version=1, status=RunStatus.RUNNING)
    assert store.get_run(run_id, tenant_id=TENANT).status is RunStatus.CANCELLED


def test_finalize_writes_the_outcome_once(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    store.advance(run_id, expected_version=0, node="compose", status=RunStatus.RUNNING)
    result = make_result(run_id)
    assert store.finalize(run_id, result, expected_version=1) is True
    record = store.get_run(run_id, tenant_id=TENANT)
    assert (record.status, record.verdict, record.fallback_type) == (
        RunStatus.SUCCESS,
        Verdict.PASS,
        None,
    )
    assert (record.version, record.node) == (2, "finalize")
    assert record.final_answer == result.final_answer
    assert record.self_evaluation == result.self_evaluation
    (event,) = store.events_since(run_id, tenant_id=TENANT)
    assert (event.node, event.kind, event.payload["status"]) == ("finalize", "completed", "SUCCESS")

    assert store.finalize(run_id, make_result(run_id, fallback=True)) is False
    assert store.finalize(run_id, result, expected_version=1) is False
    assert store.get_run(run_id, tenant_id=TENANT) == record
    assert len(store.events_since(run_id, tenant_id=TENANT)) == 1


def test_finalize_with_a_stale_version_raises(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    store.advance(run_id, expected_version=0, status=RunStatus.RUNNING)
    before = store.get_run(run_id, tenant_id=TENANT)
    with pytest.raises(StaleStateError):
        store.finalize(run_id, make_result(run_id), expected_version=0)
    assert store.get_run(run_id, tenant_id=TENANT) == before
    assert store.events_since(run_id, tenant_id=TENANT) == []
    with pytest.raises(RunNotFoundError):
        store.finalize("missing", make_result("missing"))
    with pytest.raises(StoreError, match="given for run"):
        store.finalize(run_id, make_result("another-run"))


def test_finalize_is_one_transaction(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    with _refused_finalize_events(store):  # the event insert fails after the run's update
        with pytest.raises((StoreError, IntegrityError)):
            store.finalize(run_id, make_result(run_id, fallback=True))
    record = store.get_run(run_id, tenant_id=TENANT)
    assert (record.status, record.version, record.final_answer) == (RunStatus.PENDING, 0, None)
    assert store.finalize(run_id, make_result(run_id, fallback=True)) is True
    record = store.get_run(run_id, tenant_id=TENANT)
    assert (record.status, record.fallback_type) == (
        RunStatus.FALLBACK,
        FallbackType.SEMANTIC_UNSUPPORTED,
    )


def test_self_evaluation_round_trips_exactly(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    result = make_result(run_id)
    store.finalize(run_id, result)
    stored = store.get_run(run_id, tenant_id=TENANT).self_evaluation
    assert stored == result.self_evaluation
    assert stored is not None
    assert stored.model_dump_json() == result.self_evaluation.model_dump_json()


def test_datetimes_are_timezone_aware_utc(store: RunStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    event = append_event(store, run_id, node="plan", kind="started")
    store.finalize(run_id, make_result(run_id))
    record = store.get_run(run_id, tenant_id=TENANT)
    stamps = [record.created_at, record.updated_at, record.finished_at, event.created_at]
    stamps += [e.created_at for e in store.events_since(run_id, tenant_id=TENANT)]
    assert all(_is_utc(stamp) for stamp in stamps)
    assert all(stamp is not None and stamp >= before for stamp in stamps)
    assert record.finished_at is not None and record.created_at is not None
    assert record.finished_at >= record.created_at


# -- cancellation -------------------------------------------------------------------------


def test_request_cancel_sets_the_flag_until_the_run_ends(store: RunStore) -> None:
    run_id = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    assert store.is_cancel_requested(run_id) is False
    assert store.request_cancel(run_id, tenant_id=TENANT) is True
    assert store.request_cancel(run_id, tenant_id=TENANT) is True
    assert store.is_cancel_requested(run_id) is True
    assert store.get_run(run_id, tenant_id=TENANT).cancel_requested is True

    finished = store.create_run(tenant_id=TENANT, query=QUERY, intent=Intent.DIAGNOSIS)
    store.finalize(finished, make_result(finished))
    assert store.request_cancel(finished, tenant_id=TENANT) is False
    assert store.is_cancel_requested(finished) is False
    with pytest.raises(RunNotFoundError):
        store.request_cancel("missing", tenant_id=TENANT)
    with pytest.raises(RunNotFoundError):
        store.is_cancel_requested("missing")


# -- bundles and verified runs ------------------------------------------------------------


def test_to_bundle_round_trips_a_stored_run(store: RunStore) -> None:
    original = make_bundle()
    run_id = store.create_run(tenant_id=TENANT, query=original.query, intent=original.intent,
                              session_id="session-1")
    with pytest.raises(StoreError, match="no executor output"):
        store.to_bundle(run_id, tenant_id=TENANT)
    assert executor_output(store, run_id) is None
    for invocation in original.invocations:
        add_invocation(store, run_id, invocation)
    set_executor_output(store, run_id, original.executor_output_raw)
    assert executor_output(store, run_id) == original.executor_output_raw
    exported = store.to_bundle(run_id, tenant_id=TENANT)
    assert exported == original.model_copy(update={"run_id": run_id})
    with pytest.raises(RunNotFoundError):
        set_executor_output(store, "missing", "{}")


def test_save_verified_run_stores_everything(store: RunStore) -> None:
    bundle = make_bundle()
    result = make_result("verify-1")
    attempts = [make_attempt("verify-1", number=1), make_attempt("verify-1", role="composer")]
    events = [("gatekeep", "completed", {"severity": "pass"}), ("verify", "completed", {})]
    saved = store.save_verified_run(tenant_id=TENANT, bundle=bundle, result=result, events=events,
                                    attempts=attempts)

    record = store.get_run(saved, tenant_id=TENANT)
    assert (saved, record.origin, record.origin_run_id) == ("verify-1", "verify", "source-run")
    assert (record.status, record.verdict, record.version) == (RunStatus.SUCCESS, Verdict.PASS, 1)
    assert record.self_evaluation == result.self_evaluation
    assert store.list_invocations(saved) == bundle.invocations
    assert store.list_attempts(saved) == attempts
    stored_events = [(e.seq, e.node, e.kind) for e in store.events_since(saved, tenant_id=TENANT)]
    assert stored_events == [
        (1, "gatekeep", "completed"),
        (2, "verify", "completed"),
        (3, "finalize", "completed"),
    ]
    assert store.to_bundle(saved, tenant_id=TENANT) == bundle.model_copy(update={"run_id": saved})
    assert record.final_answer == result.final_answer


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param("duplicate_attempt", id="duplicate-attempt-key"),
        pytest.param("duplicate_tool_call", id="duplicate-tool-call-id"),
        pytest.param("attempt_of_another_run", id="attempt-of-another-run"),
    ],
)
def test_save_verified_run_writes_nothing_on_failure(store: RunStore, breakage: str) -> None:
    bundle = make_bundle()
    attempts = [make_attempt("verify-1")]
    if breakage == "duplicate_attempt":
        attempts.append(make_attempt("verify-1", outcome="error"))
    elif breakage == "duplicate_tool_call":
        invocations = [*bundle.invocations, make_invocation("toolu_01")]
        bundle = bundle.model_copy(update={"invocations": invocations})
    else:
        attempts.append(make_attempt("other-run"))
    with pytest.raises(StoreError):
        store.save_verified_run(
            tenant_id=TENANT, bundle=bundle,
            result=make_result("verify-1"),
            events=[("verify", "completed", {})],
            attempts=attempts,
        )
    with pytest.raises(RunNotFoundError):
        store.get_run("verify-1", tenant_id=TENANT)
    assert store.list_runs(tenant_id=TENANT) == []
