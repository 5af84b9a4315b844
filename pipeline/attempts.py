"""Model calls with the runtime's technical retry, every attempt recorded.

The first attempt and the retry get byte-identical input; each attempt becomes an
`LlmAttempt` row with the input's sha256.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from models.run import LlmAttempt
from pipeline.agents.base import ModelReply, SingleTurnModel
from pipeline.errors import (
    GuardRejectedError,
    ProviderOutputInvalidError,
    ProviderUnavailableError,
    RunFailure,
)
from pipeline.prompts import Prompt, load_prompt
from pipeline.serialization import sha256_hex

T = TypeVar("T")
MAX_ATTEMPTS = 2  # one technical retry

_RETRYABLE = (ProviderOutputInvalidError, ProviderUnavailableError, GuardRejectedError)


@dataclass
class AttemptLog:
    """Collects attempt rows for one run."""

    run_id: str
    attempts: list[LlmAttempt] = field(default_factory=list)


class AttemptsExhaustedError(RunFailure):
    """Every allowed attempt failed; the last error is the cause."""


def call_with_retry(
    model: SingleTurnModel,
    *,
    role: str,
    payload: bytes,
    parse: Callable[[str], T],
    log: AttemptLog,
    cycle: int = 0,
) -> T:
    """Call `model` up to MAX_ATTEMPTS times with the same bytes; return the parsed answer.

    `parse` validates the text (and may apply guards); a ValidationError or a retryable
    `RunFailure` uses the retry. Anything else is not retried.
    """
    prompt = load_prompt(role)
    digest = sha256_hex(payload)
    last: Exception | None = None
    for number in range(1, MAX_ATTEMPTS + 1):
        started = time.perf_counter()
        reply: ModelReply | None = None

        def record(outcome: str, error: Exception | None, *, number: int = number,
                   started: float = started, reply: ModelReply | None = None) -> None:
            log.attempts.append(_attempt_row(
                log.run_id, role=role, cycle=cycle, number=number, prompt=prompt,
                digest=digest, model=model.model, reply=reply,
                latency_ms=(time.perf_counter() - started) * 1000, outcome=outcome,
                error_type=type(error).__name__ if error else None,
            ))

        try:
            reply = model.respond(prompt, payload)
            result = parse(reply.text)
        except ValidationError as exc:
            last = exc
            record("invalid_output", exc, reply=reply)
        except _RETRYABLE as exc:
            last = exc
            record(_outcome(exc), exc, reply=reply)
        except Exception as exc:
            record("error", exc, reply=reply)
            raise
        else:
            record("ok", None, reply=reply)
            return result
    raise AttemptsExhaustedError(f"{role} failed after {MAX_ATTEMPTS} attempts") from last


def _attempt_row(
    run_id: str,
    *,
    role: str,
    cycle: int,
    number: int,
    prompt: Prompt,
    digest: str,
    model: str,
    reply: ModelReply | None,
    latency_ms: float,
    outcome: str,
    error_type: str | None,
) -> LlmAttempt:
    return LlmAttempt(
        run_id=run_id, role=role, cycle=cycle, attempt_number=number,
        prompt_name=prompt.name, prompt_version=prompt.version, input_sha256=digest,
        model=model, latency_ms=round(latency_ms, 3),
        input_tokens=reply.input_tokens if reply else 0,
        output_tokens=reply.output_tokens if reply else 0,
        cache_read_tokens=reply.cache_read_tokens if reply else 0,
        cache_write_tokens=reply.cache_write_tokens if reply else 0,
        cost_usd=reply.cost_usd if reply else 0.0,
        outcome=outcome, error_type=error_type,
    )


def _outcome(exc: Exception) -> str:
    if isinstance(exc, GuardRejectedError):
        return "guard_rejected"
    if isinstance(exc, ProviderOutputInvalidError):
        return "invalid_output"
    return "unavailable"
