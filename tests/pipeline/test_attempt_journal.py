"""attempt_call with a journal: a row before each request of a remote model and its outcome
after; nothing journaled for local models; cancellation recorded and propagated."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from models.common import Intent
from models.verifier import VerifierOutput
from pipeline.agents.claude import ClaudeVerifier
from pipeline.errors import (
    BudgetExceededError,
    ProviderUnavailableError,
    RunCancelledError,
)
from pipeline.model import ModelReply
from pipeline.prompts import load_prompt
from pipeline.run.attempts import AttemptLog, Retrying, RetryPolicy, attempt_call, call_with_retry
from pipeline.run.cancellation import CancelToken, bind
from pipeline.store import RunStore
from tests.doubles import Scripted
from tests.providers.helpers import MODEL, USAGE, Sleeps, tool_reply
from tests.spec.helpers import verifier_reply

TENANT = "team-a"
"""The owner of this module's runs."""

PAYLOAD = b'{"claims":[{"claim_id":"c1"}]}'
GOOD = verifier_reply("PASS", {"c1": "direct_observation"})


@dataclass
class FakeJournal:
    """Rows by (run, role, cycle, number), numbered like the store: one above the highest."""

    rows: dict[tuple[str, str, int, int], dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def begin_attempt(self, run_id: str, *, role: str, cycle: int, prompt_name: str,
                      prompt_version: str, input_sha256: str, model: str) -> int:
        taken = [n for (r, ro, c, n) in self.rows if (r, ro, c) == (run_id, role, cycle)]
        number = max(taken, default=0) + 1
        self.rows[run_id, role, cycle, number] = {"outcome": "in_flight", "model": model,
                                                   "input_sha256": input_sha256}
        self.calls.append(f"begin {role} {number}")
        return number

    def end_attempt(self, run_id: str, role: str, cycle: int, number: int, *, outcome: str,
                    **usage: Any) -> bool:
        self.rows[run_id, role, cycle, number].update(outcome=outcome, **usage)
        self.calls.append(f"end {role} {number} {outcome}")
        return True

    def answered(self, run_id: str, *, role: str, cycle: int, input_sha256: str) -> str | None:
        found = [row["reply"] for (r, ro, c, _), row in sorted(self.rows.items())
                 if (r, ro, c) == (run_id, role, cycle) and row["outcome"] == "ok"
                 and row["input_sha256"] == input_sha256 and row.get("reply")]
        self.calls.append(f"answered {role}")
        return found[-1] if found else None

    def outcomes(self) -> list[str]:
        return [row["outcome"] for row in self.rows.values()]


def _verifier(provider: Scripted) -> Retrying:
    return ClaudeVerifier(provider, MODEL, policy=RetryPolicy(sleep=Sleeps())).retrying()


def _verify(model: Any, log: AttemptLog) -> VerifierOutput:
    return call_with_retry(model, role="verifier", payload=PAYLOAD,
                           parse=VerifierOutput.model_validate_json, log=log)


def test_journal__remote_model_row_written_before_the_request_and_completed_after() -> None:
    journal = FakeJournal()
    seen: list[list[str]] = []

    class Watching(Scripted):
        def send(self, request: Any) -> Any:
            seen.append(journal.outcomes())  # the row is there while the request is out
            return super().send(request)

    log = AttemptLog("run-1", journal=journal, start={"verifier": 4})
    _verify(_verifier(Watching().enqueue(tool_reply("submit_verification", GOOD))), log)
    assert seen == [["in_flight"]]
    assert journal.calls == ["answered verifier", "begin verifier 1", "end verifier 1 ok"]
    row = journal.rows["run-1", "verifier", 0, 1]
    assert row["input_tokens"] == USAGE.input_tokens and row["cost_usd"] > 0
    assert row["latency_ms"] >= 0 and row["error_type"] is None
    assert log.attempts == []  # never committed a second time
    assert [a.attempt_number for a in log.journaled] == [1]
    assert log.counters() == {"verifier": 4}  # the journal's number never lowers a counter
    assert log.tokens_used == USAGE.total


def test_journal__each_retry_is_a_row_numbered_by_the_journal() -> None:
    journal = FakeJournal()
    provider = Scripted().enqueue(
        ProviderUnavailableError("verifier: HTTP 529 overloaded"),
        tool_reply("submit_verification", {"not": "a verification"}),
        tool_reply("submit_verification", GOOD))
    log = AttemptLog("run-1", journal=journal)
    _verify(_verifier(provider), log)
    assert journal.outcomes() == ["unavailable", "invalid_output", "ok"]
    assert [a.attempt_number for a in log.journaled] == [1, 2, 3]
    assert log.counters() == {"verifier": 3} and log.attempts == []


def test_journal__local_models_never_journal() -> None:
    journal = FakeJournal()
    log = AttemptLog("run-1", journal=journal)
    _verify(Scripted().enqueue(GOOD), log)
    assert journal.rows == {} and [a.outcome for a in log.attempts] == ["ok"]
    assert log.attempts[0].cost_usd == 0


def test_journal__a_scripted_model_may_stand_in_for_a_remote_one() -> None:
    journal = FakeJournal()
    log = AttemptLog("run-1", journal=journal)
    _verify(Retrying(Scripted().enqueue(GOOD), remote=True), log)
    assert journal.outcomes() == ["ok"] and log.attempts == []


def test_journal__spent_budget_is_a_journaled_row_too() -> None:
    journal = FakeJournal()
    log = AttemptLog("run-1", journal=journal, token_budget=10, tokens_used=10)
    with pytest.raises(BudgetExceededError):
        _verify(_verifier(Scripted()), log)
    assert journal.outcomes() == ["budget_exceeded"] and log.attempts == []


def test_cancel__a_cancelled_request_is_recorded_cancelled_with_zero_usage_and_propagates(
) -> None:
    journal = FakeJournal()
    provider = Scripted().enqueue(RunCancelledError("verifier: request abandoned"))
    log = AttemptLog("run-1", journal=journal)
    with pytest.raises(RunCancelledError):
        _verify(_verifier(provider), log)
    row = journal.rows["run-1", "verifier", 0, 1]
    assert row["outcome"] == "cancelled" and row["error_type"] == "RunCancelledError"
    assert (row["input_tokens"], row["output_tokens"], row["cost_usd"]) == (0, 0, 0.0)


def test_cancel__nothing_is_sent_once_the_token_is_set() -> None:
    journal = FakeJournal()
    provider = Scripted().enqueue(tool_reply("submit_verification", GOOD))
    token = CancelToken()
    token.cancel("the run was cancelled")
    with bind(token), pytest.raises(RunCancelledError, match="the run was cancelled"):
        _verify(_verifier(provider), AttemptLog("run-1", journal=journal))
    assert journal.rows == {} and provider.requests == []


def test_cancel__a_backoff_wait_ends_when_the_token_is_set() -> None:
    provider = Scripted().enqueue(
        ProviderUnavailableError("verifier: HTTP 429", retry_after=20.0))
    token = CancelToken()
    log = AttemptLog("run-1", policy=RetryPolicy(transient_budget_s=60.0))
    threading.Timer(0.2, token.cancel, args=("the run was cancelled",)).start()
    started = time.monotonic()
    with bind(token), pytest.raises(RunCancelledError):
        _verify(ClaudeVerifier(provider, MODEL).retrying(), log)
    assert time.monotonic() - started < 1.5
    assert [a.outcome for a in log.journaled + log.attempts] == ["unavailable"]


def test_attempt_call__remote_flag_without_a_journal_keeps_rows_for_the_commit() -> None:
    log = AttemptLog("run-1")
    prompt = load_prompt("verifier")
    attempt_call(lambda: ModelReply(text="{}"), role="verifier", prompt=prompt, digest="d",
                 model=MODEL, parse=lambda text: text, log=log, remote=True)
    assert [a.outcome for a in log.attempts] == ["ok"] and log.journaled == []


def test_journal__on_the_store_rows_complete_and_nothing_is_left_for_the_commit(
    store: RunStore,
) -> None:
    run_id = store.create_run(tenant_id=TENANT, query="q", intent=Intent.DIAGNOSIS)
    provider = Scripted().enqueue(
        tool_reply("submit_verification", {"not": "a verification"}),
        tool_reply("submit_verification", GOOD))
    log = AttemptLog(run_id, journal=store)
    _verify(_verifier(provider), log)
    rows = store.list_attempts(run_id)
    assert [(a.attempt_number, a.outcome) for a in rows] == [(1, "invalid_output"), (2, "ok")]
    assert rows[1].input_tokens == USAGE.input_tokens and rows[1].latency_ms >= 0
    assert log.attempts == []
    assert [(a.attempt_number, a.outcome) for a in log.journaled] == [
        (a.attempt_number, a.outcome) for a in rows]


def test_journal__a_redelivered_node_reuses_the_answer_its_dead_copy_got() -> None:
    """A worker that died after the answer came back, before its node committed, left an ok
    row with the answer: the node's next copy parses that instead of calling again."""
    journal = FakeJournal()
    provider = Scripted().enqueue(tool_reply("submit_verification", GOOD))
    first = _verify(_verifier(provider), AttemptLog(run_id="r1", journal=journal))
    assert journal.outcomes() == ["ok"] and len(provider.requests) == 1
    again = _verify(_verifier(provider), AttemptLog(run_id="r1", journal=journal))
    assert again == first
    assert len(provider.requests) == 1 and journal.outcomes() == ["ok"]  # no request, no row
    other = AttemptLog(run_id="r1", journal=journal)
    provider.enqueue(tool_reply("submit_verification", GOOD))
    call_with_retry(_verifier(provider), role="verifier", payload=PAYLOAD + b" ",
                    parse=VerifierOutput.model_validate_json, log=other)
    assert len(provider.requests) == 2  # other bytes: a call of its own


def test_journal__a_redelivered_executor_turn_reuses_the_whole_answer() -> None:
    """The Executor needs its answer's tool_use blocks, not a text: a copy of the execute node
    that runs after its dead copy's accepted turn goes on from the journaled answer, with the
    same tool calls and no second request (it raised IndexError before)."""
    from pipeline.tools import default_registry
    from tests.agents.test_claude_executor import (
        ID_LOGS,
        ID_METRICS,
        LOGS,
        METRICS,
        executor,
        transcript,
        uses,
    )

    journal = FakeJournal()
    provider = Scripted().enqueue(uses((ID_LOGS, "search_logs", LOGS),
                                               (ID_METRICS, "query_metrics", METRICS)))
    first = executor(provider).step(transcript(), registry=default_registry(),
                                    log=AttemptLog(run_id="r1", journal=journal))
    again = executor(provider).step(transcript(), registry=default_registry(),
                                    log=AttemptLog(run_id="r1", journal=journal))
    assert len(provider.requests) == 1 and journal.outcomes() == ["ok"]
    assert [c.tool_call_id for c in again.tool_calls] == [ID_LOGS, ID_METRICS]
    assert again == first
