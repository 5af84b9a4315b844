"""Batch re-verification in the store, on SQLite and PostgreSQL: keyset selection, batches
scoped to their tenant, items written exactly once, counters that end the batch, cancel and
resume, stalled batches claimed once, and stored runs never written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, select

from models.batch import BatchStatus, ItemDetail, ItemResult, ItemStatus, Selection
from models.common import Intent, RunStatus
from models.tables import DiagnosisRunRow
from pipeline.errors import BatchNotFoundError
from pipeline.store import RunStore
from tests.store.samples import make_attempt, make_bundle, make_invocation, make_result
from tests.store_rows import add_invocation, batch_attempts, set_executor_output

A, B = "team-a", "team-b"


def _finished(store: RunStore, tenant: str = A, *, session: str | None = None,
              fallback: bool = False) -> str:
    bundle = make_bundle()
    run_id = store.create_run(tenant_id=tenant, query=bundle.query, intent=Intent.DIAGNOSIS,
                              session_id=session, state={"next": {"node": "plan"}})
    add_invocation(store, run_id, make_invocation("toolu_01"))
    set_executor_output(store, run_id, bundle.executor_output_raw)
    store.finalize(run_id, make_result(run_id, fallback=fallback))
    return run_id


def _rows(store: RunStore) -> list[dict[str, Any]]:
    """Every stored run, column by column."""
    with store.engine.connect() as connection:  # a byte-level snapshot of the runs
        rows = connection.execute(select(DiagnosisRunRow.__table__)
                                  .order_by(DiagnosisRunRow.run_id)).mappings()
        return [dict(row) for row in rows]


def _done(seq: int, run_id: str, *, error: bool = False) -> ItemResult:
    if error:
        return ItemResult(seq=seq, run_id=run_id, status=ItemStatus.ERROR, error="corrupt")
    return ItemResult(seq=seq, run_id=run_id, status=ItemStatus.DONE, old_verdict="PASS",
                      new_verdict="LOW_CONFID", detail=ItemDetail(prompts=["verifier:v@5"]),
                      input_tokens=10, output_tokens=5, cost_usd=0.01)


def _batch(store: RunStore, batch_id: str = "b1", tenant: str = A, **kw: Any) -> Any:
    return store.create_batch(batch_id=batch_id, tenant_id=tenant,
                              selection=kw.pop("selection", Selection()), provider="offline",
                              message_batches=False, chunk_size=kw.pop("chunk_size", 2))


def test_selection_pages_by_keyset_newest_first_with_every_filter(store: RunStore) -> None:
    ids = [_finished(store, session="s1" if i % 2 else "s2", fallback=i == 4) for i in range(5)]
    _finished(store, B)
    pending = store.create_run(tenant_id=A, query="q", intent=Intent.DIAGNOSIS)
    newest_first = [r.run_id for r in store.iter_runs(tenant_id=A, selection=Selection(),
                                                       page=2)]
    assert newest_first == [pending, *reversed(ids)]  # pages of 2, nothing twice or lost
    ended = [r.run_id for r in store.iter_runs(tenant_id=A, selection=Selection(),
                                               terminal_only=True, page=2)]
    assert ended == list(reversed(ids))

    def chosen(**kw: Any) -> list[str]:
        return [r.run_id for r in store.iter_runs(tenant_id=A, selection=Selection(**kw),
                                                  page=2)]

    assert chosen(session_id="s1") == [ids[3], ids[1]]
    assert chosen(verdicts=["REJECT"]) == [ids[4]]
    assert chosen(verdicts=["null"]) == [pending]
    assert chosen(statuses=[RunStatus.FALLBACK]) == [ids[4]]
    assert chosen(limit=3) == [pending, ids[4], ids[3]]
    now = datetime.now(UTC)
    assert chosen(since=now + timedelta(hours=1)) == []
    assert len(chosen(until=now + timedelta(hours=1))) == 6
    assert chosen(prompt_versions={"verifier": "no-such-version"}) == []


def test_a_page_of_runs_is_one_query_whatever_it_leaves_out(store: RunStore) -> None:
    """Selection never goes back for a column per run (a batch over 1,000 runs once read each
    run's answer and self-evaluation again, two queries per run: 2 s before any judging)."""
    ids = [_finished(store) for _ in range(5)]
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    # the reading pool (its own engine on PostgreSQL) and the writing one; on SQLite one pool
    engines = {id(e.pool): e for e in (store.engine, store.read_engine)}.values()
    for engine in engines:
        event.listen(engine, "before_cursor_execute", seen)
    try:
        summaries = list(store.iter_runs(tenant_id=A, selection=Selection(), summary=True))
        assert len([s for s in statements if "diagnosis_run" in s]) == 1
        assert [r.run_id for r in summaries] == list(reversed(ids))
        assert {(r.final_answer, r.self_evaluation) for r in summaries} == {(None, None)}
        statements.clear()
        full = list(store.iter_runs(tenant_id=A, selection=Selection()))
        assert len([s for s in statements if "diagnosis_run" in s]) == 1
        assert all(r.final_answer is not None and r.self_evaluation is not None for r in full)
        statements.clear()
        audited = list(store.iter_runs(
            tenant_id=A, selection=Selection(prompt_versions={"verifier": "nope"}),
            summary=True))
        assert audited == [] and len([s for s in statements if "diagnosis_run" in s]) == 1
        statements.clear()
        batch = _batch(store)
        assert batch.total == 5
        assert len([s for s in statements if "FROM diagnosis_run" in s]) == 1
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", seen)


def test_a_batch_holds_its_tenants_ended_runs_and_is_hidden_from_others(store: RunStore) -> None:
    mine = [_finished(store) for _ in range(3)]
    _finished(store, B)
    store.create_run(tenant_id=A, query="q", intent=Intent.DIAGNOSIS)  # not ended: not selected
    batch = _batch(store)
    assert (batch.status, batch.total, batch.done, batch.failed) == (BatchStatus.PENDING, 3, 0, 0)
    assert {i.run_id for i in store.iter_items("b1", tenant_id=A)} == set(mine)
    with pytest.raises(BatchNotFoundError) as unknown:
        store.get_batch("nope", tenant_id=A)
    with pytest.raises(BatchNotFoundError) as cross:
        store.get_batch("b1", tenant_id=B)
    assert str(cross.value) == str(unknown.value).replace("nope", "b1")
    with pytest.raises(BatchNotFoundError):
        store.cancel_batch("b1", tenant_id=B)
    assert store.get_batch("b1").status is BatchStatus.PENDING


def test_items_land_once_and_the_counters_end_the_batch(store: RunStore) -> None:
    ids = [_finished(store) for _ in range(3)]
    before = _rows(store)
    _batch(store)
    assert store.start_batch("b1") and not store.start_batch("b1")
    items = {i.run_id: i.seq for i in store.iter_items("b1", tenant_id=A)}
    first = [_done(items[ids[0]], ids[0]), _done(items[ids[1]], ids[1])]
    attempts = [make_attempt(ids[0]), make_attempt(ids[1])]
    assert store.record_items("b1", first, attempts) == 2
    assert store.record_items("b1", first, attempts) == 0  # a re-sent chunk lands nothing
    batch = store.get_batch("b1")
    assert (batch.status, batch.done, batch.failed, batch.pending) == (
        BatchStatus.RUNNING, 2, 0, 1)
    assert len(batch_attempts(store, "b1")) == 2  # the duplicate's attempts were not written
    assert store.list_attempts(ids[0]) == []  # a run's own attempts exclude its batches'
    assert store.record_items("b1", [_done(items[ids[2]], ids[2], error=True)], []) == 1
    batch = store.get_batch("b1")
    assert (batch.status, batch.done, batch.failed) == (BatchStatus.COMPLETED_WITH_ERRORS, 2, 1)
    assert batch.finished_at is not None
    assert _rows(store) == before  # the stored runs, column by column


def test_an_empty_batch_completes_when_started(store: RunStore) -> None:
    _batch(store, selection=Selection(session_id="none"))
    store.start_batch("b1")
    assert store.get_batch("b1").status is BatchStatus.COMPLETED


def test_cancel_stops_a_batch_and_resume_reopens_what_is_left(store: RunStore) -> None:
    ids = [_finished(store) for _ in range(5)]
    _batch(store, chunk_size=2)
    store.start_batch("b1")
    seqs = {i.run_id: i.seq for i in store.iter_items("b1", tenant_id=A)}
    store.record_items("b1", [_done(seqs[ids[0]], ids[0])], [])
    assert store.cancel_batch("b1", tenant_id=A)
    assert not store.cancel_batch("b1", tenant_id=A)
    batch = store.get_batch("b1")
    assert (batch.status, batch.pending, batch.cancel_requested) == (
        BatchStatus.CANCELLED, 4, True)
    # newest first: the oldest run is seq 4, alone in the last chunk of 2, and judged
    assert seqs[ids[0]] == 4
    assert store.pending_ranges("b1") == [(0, 2), (2, 4)]
    assert [s for s, _ in store.pending_items("b1", start=0, end=5)] == [0, 1, 2, 3]
    reopened = store.reopen_batch("b1", tenant_id=A)
    assert (reopened.status, reopened.cancel_requested) == (BatchStatus.RUNNING, False)


def test_a_stalled_batch_is_claimed_by_one_sweeper(store: RunStore) -> None:
    _finished(store)
    _batch(store)
    store.start_batch("b1")
    later = datetime.now(UTC) + timedelta(minutes=5)
    (stalled,) = store.stalled_batches(older_than_s=60, now=later)
    assert store.claim_stalled_batch("b1", updated_at=stalled.updated_at)
    assert not store.claim_stalled_batch("b1", updated_at=stalled.updated_at)
    assert store.get_batch("b1").resend_count == 1
    assert store.stalled_batches(older_than_s=60) == []


def test_runs_that_cannot_be_rejudged_say_why_in_one_line(store: RunStore) -> None:
    good = _finished(store)
    bare = store.create_run(tenant_id=A, query="q", intent=Intent.DIAGNOSIS)
    store.finalize(bare, make_result(bare, fallback=True))
    knowledge = store.create_run(tenant_id=A, query="how?", intent=Intent.KNOWLEDGE_QUERY)
    loaded = store.load_for_judging([good, bare, knowledge, "gone", ], tenant_id=A)
    record, bundle = loaded[good]  # type: ignore[misc]
    assert record.run_id == good and [i.tool_call_id for i in bundle.invocations] == ["toolu_01"]
    assert "no stored Executor output" in loaded[bare]  # type: ignore[operator]
    assert "KNOWLEDGE_QUERY" in loaded[knowledge]  # type: ignore[operator]
    assert loaded["gone"] == "the run is no longer stored"
    assert store.load_for_judging([good], tenant_id=B) == {good: "the run is no longer stored"}


def test_the_journal_keeps_an_accepted_answer_for_its_exact_input(store: RunStore) -> None:
    run_id = _finished(store)
    number = store.begin_attempt(run_id, role="verifier", cycle=0, prompt_name="p",
                                 prompt_version="5", input_sha256="a" * 64, model="m")
    assert store.answered(run_id, role="verifier", cycle=0, input_sha256="a" * 64) is None
    store.end_attempt(run_id, "verifier", 0, number, outcome="ok", reply='{"verdict":"PASS"}')
    assert store.answered(run_id, role="verifier", cycle=0,
                          input_sha256="a" * 64) == '{"verdict":"PASS"}'
    assert store.answered(run_id, role="verifier", cycle=0, input_sha256="b" * 64) is None
    assert store.answered(run_id, role="composer", cycle=0, input_sha256="a" * 64) is None
