"""Model calls with the runtime's retries, every attempt recorded.

The SDK retries nothing (`max_retries=0`); this module owns every retry, by error type:

- invalid output (a `ValidationError` from `parse`, `ProviderOutputInvalidError`) and a guard's
  refusal (`GuardRejectedError`): one technical retry (`RetryPolicy.technical_retries`);
- a transient provider failure (`ProviderUnavailableError`: 429, 529, 5xx, timeout, dropped
  connection): back off and retry, at most `transient_max_retries` times and at most
  `transient_budget_s` seconds of waiting in all; the wait is the provider's `retry_after` when
  it gave one (a wait longer than what is left of the budget ends the call at once), else
  exponential backoff with jitter;
- anything else fails at once: `ProviderRejectedError` (400, 404 ...) and other `RunFailure`s
  propagate as they are; a `ConfigurationError` (missing or rejected key) propagates unchanged so
  the caller can show its one line.

Every attempt gets byte-identical input (the caller's `call` closes over fixed bytes) and becomes
an `LlmAttempt` row with the input's sha256, tokens and cost. Attempt numbers count per role
across calls made through one `AttemptLog` and can be seeded (`start`) so a node continues the
numbering its predecessors persisted. Exhaustion raises `AttemptsExhaustedError`.

The wrapper. `Retrying` puts these rules around any `Model` (`pipeline.model`, the one door): its
`ask` is the call with retries. Whoever builds the model gives the wrapper its policy and says
whether the model sends network requests (`remote`); nothing is looked up on the model itself. A
bare `Model` handed to `call_with_retry` is a local one under the log's policy.

The journal. A model that sends network requests (`remote=True`: the Claude agents) called
through an `AttemptLog` with a `journal` (the run store) gets its rows written as they happen:
an `in_flight` row before the request goes out, numbered by the journal (one above the highest
stored for the run, role and cycle), completed with its outcome, usage and latency after. So a
worker killed mid-call or a node whose commit loses its race still leaves a row for every
request the provider saw. Those attempts are in `log.journaled`, never in `log.attempts` (which
the node's commit writes). Offline models never journal.

Cancellation. With a `CancelToken` bound (`pipeline.run.cancellation`), no attempt starts once it is
set, a backoff wait ends when it is set, and a `RunCancelledError` from the provider is recorded
with outcome `cancelled` and whatever usage is known (none: zeros), then propagates.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from models.run import LlmAttempt
from pipeline import telemetry
from pipeline.errors import (
    AttemptsExhaustedError,
    BudgetExceededError,
    GuardRejectedError,
    ProviderOutputInvalidError,
    ProviderRejectedError,
    ProviderUnavailableError,
    RunCancelledError,
)
from pipeline.model import Model, ModelReply
from pipeline.prompts import Prompt, load_prompt
from pipeline.run.cancellation import CancelToken, current_token
from pipeline.serialization import sha256_hex
from pipeline.store.protocol import AttemptJournal

__all__ = [
    "IMMEDIATE",
    "MAX_ATTEMPTS",
    "AttemptJournal",
    "AttemptLog",
    "AttemptsExhaustedError",
    "RetryPolicy",
    "Retrying",
    "attempt_call",
    "call_with_retry",
]

T = TypeVar("T")
MAX_ATTEMPTS = 2
"""Attempts a call gets for invalid output or a guard's refusal: one technical retry."""

_TECHNICAL = (ValidationError, ProviderOutputInvalidError, GuardRejectedError)


class _RetrySettings(Protocol):
    @property
    def transient_max_retries(self) -> int: ...

    @property
    def transient_retry_budget_s(self) -> float: ...


@dataclass(frozen=True)
class RetryPolicy:
    """How many times, and how patiently, one call is tried again."""

    technical_retries: int = MAX_ATTEMPTS - 1
    transient_max_retries: int = 4
    transient_budget_s: float = 60.0
    backoff_base_s: float = 1.0
    backoff_max_s: float = 20.0
    sleep: Callable[[float], None] = time.sleep
    jitter: Callable[[], float] = random.random

    @classmethod
    def from_settings(
        cls, settings: _RetrySettings, *, sleep: Callable[[float], None] = time.sleep
    ) -> RetryPolicy:
        """The policy `VeritySettings` configures (`transient_*`)."""
        return cls(transient_max_retries=settings.transient_max_retries,
                   transient_budget_s=settings.transient_retry_budget_s, sleep=sleep)

    def backoff(self, retry: int) -> float:
        """Seconds before transient retry number `retry` (1, 2 ...) without a `retry_after`:
        exponential, capped, with jitter between half and all of it."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** (retry - 1))
        return float(ceiling * (0.5 + self.jitter() / 2))


IMMEDIATE = RetryPolicy(transient_max_retries=1, transient_budget_s=0.0, backoff_base_s=0.0)
"""The spec's minimal harness: one retry of any retryable failure, no waiting. Used when
neither the `AttemptLog` nor the `Retrying` wrapper brings a policy (bare models, test doubles)."""


@dataclass
class AttemptLog:
    """Attempt rows, per-role attempt numbers and the token budget of one run (one node).

    `start` seeds the per-role counters (`{"executor": 3}`: the next executor attempt is 4);
    `token_budget` (0 = unlimited) is checked before each call against `tokens_used`, which
    every reply's tokens are added to. `policy`, when set, wins over the `Retrying` wrapper's
    (a Claude model is wrapped in the one its settings configure); with neither, `IMMEDIATE`.

    `journal`, when set, receives the attempts of remote models as they happen (see the module
    docstring); they land in `journaled` (already stored: never commit them), the others in
    `attempts` (for the node's commit).
    """

    run_id: str
    attempts: list[LlmAttempt] = field(default_factory=list)
    start: Mapping[str, int] = field(default_factory=dict)
    token_budget: int = 0
    tokens_used: int = 0
    cycle: int = 0
    policy: RetryPolicy | None = None
    journal: AttemptJournal | None = None
    journaled: list[LlmAttempt] = field(default_factory=list)
    _counters: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def next_number(self, role: str) -> int:
        """Take the next attempt number of `role`."""
        number = self._counters.get(role, self.start.get(role, 0)) + 1
        self._counters[role] = number
        return number

    def note_number(self, role: str, number: int) -> None:
        """A number the journal gave `role`: the counters never fall behind it."""
        self._counters[role] = max(number, self._counters.get(role, self.start.get(role, 0)))

    def counters(self) -> dict[str, int]:
        """The last attempt number of every role seen (seeded ones included): persist these
        and pass them back as `start`."""
        return {**self.start, **self._counters}

    def budget_left(self) -> int | None:
        """Tokens left in the budget; None when unlimited."""
        return None if not self.token_budget else max(0, self.token_budget - self.tokens_used)

    def charge(self, reply: ModelReply) -> None:
        """Add a reply's tokens (input, output, cache reads and writes) to `tokens_used`."""
        self.tokens_used += (reply.input_tokens + reply.output_tokens
                             + reply.cache_read_tokens + reply.cache_write_tokens)


@dataclass(frozen=True)
class Retrying:
    """A `Model` under the runtime's retry rules, every attempt a row (see the module
    docstring). `policy` applies unless the `AttemptLog` brings one (with neither,
    `IMMEDIATE`); `remote`: the model sends network requests, so with a journal on the log its
    attempts are journaled as they happen. It is a `Model` itself: `respond` is one plain call."""

    inner: Model
    policy: RetryPolicy | None = None
    remote: bool = False

    @property
    def model(self) -> str:
        """The wrapped model's name."""
        return self.inner.model

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        """One call of the wrapped model: no retry, no row."""
        return self.inner.respond(prompt, payload)

    def ask(
        self, prompt: Prompt, payload: bytes, *, parse: Callable[[str], T], log: AttemptLog,
        cycle: int | None = None,
    ) -> T:
        """Call the model on the same `payload` bytes until `parse` accepts its answer or the
        policy gives up; return the parsed answer. The attempts' role is `prompt.role`."""
        return attempt_call(
            lambda: self.inner.respond(prompt, payload), role=prompt.role, prompt=prompt,
            digest=sha256_hex(payload), model=self.inner.model, parse=parse, log=log,
            cycle=cycle, policy=self.policy, remote=self.remote,
        )


def call_with_retry(
    model: Model | Retrying,
    *,
    role: str,
    payload: bytes,
    parse: Callable[[str], T],
    log: AttemptLog,
    cycle: int | None = None,
) -> T:
    """`role`'s prompt and `payload` through `model` with retries (`Retrying.ask`); a bare
    `Model` is wrapped as a local one with no policy of its own."""
    retrying = model if isinstance(model, Retrying) else Retrying(model)
    return retrying.ask(load_prompt(role), payload, parse=parse, log=log, cycle=cycle)


def attempt_call(
    call: Callable[[], ModelReply],
    *,
    role: str,
    prompt: Prompt,
    digest: str,
    model: str,
    parse: Callable[[str], T],
    log: AttemptLog,
    cycle: int | None = None,
    policy: RetryPolicy | None = None,
    remote: bool = False,
) -> T:
    """Run `call` (which must send the same bytes every time) under `log`'s policy, else
    `policy` (the caller's own), else `IMMEDIATE`. `remote`: `call` sends a network request,
    so with a journal on the log its attempts are journaled."""
    rules = log.policy or policy or IMMEDIATE
    attempt = _Attempt(role=role, prompt=prompt, digest=digest, model=model, log=log,
                       cycle=log.cycle if cycle is None else cycle,
                       journal=log.journal if remote else None, remote=remote)
    token = current_token()
    reused = attempt.reuse(parse)
    if reused is not None:
        return reused[0]
    technical = transient = 0
    waited = 0.0
    while True:
        attempt.check_budget()
        if token is not None:
            token.raise_if_cancelled(role)
        number = attempt.begin()
        started = time.perf_counter()
        reply: ModelReply | None = None
        try:
            reply = call()
            result = parse(reply.text)
        except RunCancelledError as exc:
            attempt.record("cancelled", exc, reply=reply, started=started, number=number)
            raise
        except _TECHNICAL as exc:
            attempt.record(_outcome(exc), exc, reply=reply, started=started, number=number)
            technical += 1
            if technical > rules.technical_retries:
                raise attempt.exhausted() from exc
            telemetry.model_retry(role, "technical")
        except ProviderUnavailableError as exc:
            attempt.record("unavailable", exc, reply=reply, started=started, number=number)
            transient += 1
            delay = exc.retry_after if exc.retry_after is not None else \
                rules.backoff(transient)
            delay = max(0.0, delay)
            if (transient > rules.transient_max_retries
                    or waited + delay > rules.transient_budget_s):
                raise attempt.exhausted() from exc
            telemetry.model_retry(role, "transient")
            _pause(rules, delay, token, role)
            waited += delay
        except ProviderRejectedError as exc:
            attempt.record("rejected", exc, reply=reply, started=started, number=number)
            raise
        except Exception as exc:  # ConfigurationError and other failures: not ours to retry
            attempt.record("error", exc, reply=reply, started=started, number=number)
            raise
        else:
            attempt.record("ok", None, reply=reply, started=started, number=number)
            return result


def _pause(rules: RetryPolicy, delay: float, token: CancelToken | None, role: str) -> None:
    """Back off for `delay` seconds; a set token ends the wait with RunCancelledError. The
    real clock waits on the token itself; an injected sleep (tests) is kept as it is."""
    if token is not None and rules.sleep is time.sleep:
        token.wait(delay)
    else:
        rules.sleep(delay)
    if token is not None:
        token.raise_if_cancelled(role)


@dataclass
class _Attempt:
    """The fixed facts of one call, and its row writer."""

    role: str
    prompt: Prompt
    digest: str
    model: str
    log: AttemptLog
    cycle: int
    journal: AttemptJournal | None = None
    remote: bool = False
    """The call sends a network request (the Claude provider), else an offline agent."""
    failures: int = 0

    def check_budget(self) -> None:
        left = self.log.budget_left()
        if left is None or left > 0:
            return
        error = BudgetExceededError(
            f"token budget of {self.log.token_budget} spent ({self.log.tokens_used} used)")
        self.record("budget_exceeded", error, reply=None, started=time.perf_counter(),
                    number=self.begin())
        raise error

    def reuse(self, parse: Callable[[str], T]) -> tuple[T] | None:
        """With a journal, the answer an earlier copy of this node got for the same bytes and
        accepted (its worker died before the node committed), parsed again: no second request,
        no second row. None when there is none, or when it no longer parses."""
        if self.journal is None:
            return None
        text = self.journal.answered(self.log.run_id, role=self.role, cycle=self.cycle,
                                     input_sha256=self.digest)
        if text is None:
            return None
        try:
            return (parse(text),)
        except Exception:  # a guard changed since: ask the model again
            return None

    def begin(self) -> int | None:
        """With a journal, the `in_flight` row of the attempt about to be made: its number."""
        if self.journal is None:
            return None
        number = self.journal.begin_attempt(
            self.log.run_id, role=self.role, cycle=self.cycle, prompt_name=self.prompt.name,
            prompt_version=self.prompt.version, input_sha256=self.digest, model=self.model)
        self.log.note_number(self.role, number)
        return number

    def record(
        self, outcome: str, error: Exception | None, *, reply: ModelReply | None,
        started: float, number: int | None,
    ) -> None:
        """The attempt's row: completed in the journal when it began there (`number`), else
        numbered from the log's counters and kept for the node's commit."""
        if reply is not None:
            self.log.charge(reply)
        if error is not None:
            self.failures += 1
        row = LlmAttempt(
            run_id=self.log.run_id, role=self.role, cycle=self.cycle,
            attempt_number=number if number is not None else self.log.next_number(self.role),
            prompt_name=self.prompt.name, prompt_version=self.prompt.version,
            input_sha256=self.digest, model=self.model,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            **_usage(reply), outcome=outcome,
            error_type=type(error).__name__ if error else None,
        )
        telemetry.model_call(row, provider="anthropic" if self.remote else "verity.offline",
                             started_ns=time.time_ns() - int(row.latency_ms * 1e6))
        if number is None or self.journal is None:
            self.log.attempts.append(row)
            return
        self.journal.end_attempt(
            row.run_id, row.role, row.cycle, number, outcome=outcome,
            input_tokens=row.input_tokens, output_tokens=row.output_tokens,
            cache_read_tokens=row.cache_read_tokens, cache_write_tokens=row.cache_write_tokens,
            latency_ms=row.latency_ms, cost_usd=row.cost_usd, error_type=row.error_type,
            reply=reply.text if reply is not None and outcome == "ok" else None)
        self.log.journaled.append(row)

    def exhausted(self) -> AttemptsExhaustedError:
        return AttemptsExhaustedError(
            f"{self.role} failed after {self.failures} attempts")


def _usage(reply: ModelReply | None) -> dict[str, Any]:
    if reply is None:
        return {}
    return {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens, "cost_usd": reply.cost_usd}


def _outcome(exc: Exception) -> str:
    return "guard_rejected" if isinstance(exc, GuardRejectedError) else "invalid_output"

