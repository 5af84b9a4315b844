"""Verity's errors, as a small tree. Fallbacks and retries are chosen by type, never by string.

    VerityError
    ├── ConfigurationError          bad settings, missing or rejected key; never retried
    ├── InputError                  input that is not usable: one line to the user, exit 2
    │   ├── BundleError             not JSON, wrong shape, duplicate tool_call_id ...
    │   │   └── BundleTooDeepError  nests deeper than its limit (even where other problems of
    │   │                           the same text are left to a later step)
    │   ├── UnknownSourceError      no source of that name; refused at submit
    │   └── TranscriptError         another agent's run that cannot be imported: malformed,
    │                               a missing or duplicate tool call id, no answer
    ├── SourceError                 a data source's backend could not answer:
    │   │                           unreachable, timeout, 401, 5xx, malformed, too large; the
    │   │                           tool call ends ERROR, the run goes on
    │   ├── BackendUnreachableError nothing answered: refused, not resolved, TLS failed
    │   └── BackendAuthError        the backend answered 401 or 403
    ├── ToolError                   a tool call that cannot run; the call ends ERROR, the run
    │   │                           goes on
    │   ├── UnknownToolError        no tool of that name is registered
    │   └── ToolArgumentError       arguments that do not match the tool's schema
    ├── StoreError                  the run store refused an operation
    │   ├── DuplicateToolCallError  a tool_call_id already recorded for the run; first row kept
    │   ├── RunNotFoundError        no such run id
    │   ├── BatchNotFoundError      no such re-verification batch id
    │   ├── StaleStateError         a conditional update lost the race (expected node/version)
    │   └── StoreUnavailableError   the database could not be reached; the task is retried
    ├── BrokerUnavailableError      the broker could not be reached at submit; no run is left
    ├── RateLimitedError            the HTTP API refused a run: too many for the token
    ├── RunTimeoutError             `wait` ran out of time; the run goes on
    └── RunFailure                  a run cannot go on normally; routing picks a fallback
        ├── ProviderUnavailableError    transient: 429, 529, 5xx, timeout, dropped connection;
        │                               backed off and retried (honours `retry_after`)
        ├── ProviderRejectedError       the provider refused the request (400, 404 ...); never
        │                               retried: the same bytes would be refused again
        ├── ProviderOutputInvalidError  the model answered outside its contract; technical retry
        ├── GuardRejectedError          a deterministic guard refused the answer; technical retry
        ├── AttemptsExhaustedError      every allowed attempt failed; the last error is its cause
        ├── BudgetExceededError         the run's token budget is spent
        └── RunCancelledError           the run was cancelled

Every class is defined in this module except those marked [module], which live there (the
client's own error, beside the code that raises it). tests/test_errors.py checks the drawing
against the real subclasses.

A missing or rejected API key (401, 403) is a ConfigurationError with a one-line message,
never a RunFailure: no fallback can fix it.
"""

from __future__ import annotations


class VerityError(Exception):
    """Base of every error Verity raises on purpose."""


class ConfigurationError(VerityError):
    """Settings are wrong or a key is missing or rejected. Never retried."""


class InputError(VerityError):
    """Input that cannot be used. Its message is one line for the user."""


class BundleError(InputError):
    """A run bundle that is not usable."""


class BundleTooDeepError(BundleError):
    """A bundle, or JSON text inside it, nests deeper than its limit. Raised on its own type
    because text that is otherwise left to a later step (an Executor output that is not JSON)
    is still refused when it is too deep."""


class UnknownSourceError(InputError):
    """No source of that name is configured (or the reference is not a source at all): an
    input error, refused at submit with nothing written."""


class TranscriptError(InputError):
    """Another agent's run (a transcript, a trace, answer and evidence files) that cannot be
    imported. Its message is one line and says where in the file."""


class SourceError(VerityError):
    """A backend could not answer: unreachable, timed out, refused the credentials, answered
    an error or something that is not its documented format, or more than the byte bound.
    The message is one line naming the backend and the reason, never a credential."""


class BackendUnreachableError(SourceError):
    """Nothing answered: connection refused, name not resolved, TLS handshake failed."""


class BackendAuthError(SourceError):
    """The backend answered 401 or 403: the credentials are missing or refused."""


class ToolError(VerityError):
    """A tool call that cannot run: unknown tool or bad arguments."""


class UnknownToolError(ToolError):
    """No tool of that name is registered."""


class ToolArgumentError(ToolError):
    """Arguments that do not match the tool's schema; the message names the first problem."""


class StoreError(VerityError):
    """The run store refused an operation."""


class DuplicateToolCallError(StoreError):
    """A tool_call_id was already recorded for this run; the first row is kept."""

    def __init__(self, run_id: str, tool_call_id: str) -> None:
        super().__init__(f"duplicate tool_call_id {tool_call_id!r} in run {run_id}")
        self.run_id = run_id
        self.tool_call_id = tool_call_id


class RunNotFoundError(StoreError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class BatchNotFoundError(StoreError):
    """No re-verification batch has this id (for this tenant: another's looks the same)."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"no batch with id {batch_id!r}")
        self.batch_id = batch_id


class StaleStateError(StoreError):
    """A conditional update found the run in another state than expected."""


class StoreUnavailableError(StoreError):
    """The database could not be reached or dropped the connection; worth another try."""


class BrokerUnavailableError(VerityError):
    """The message broker could not be reached to enqueue a run; the run was not kept."""


class RateLimitedError(VerityError):
    """The HTTP API refused to create a run: the token created too many; retry after
    `retry_after_s` seconds."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class RunTimeoutError(VerityError):
    """A client's `wait` ran out of time; the run goes on."""


class RunFailure(VerityError):
    """A run cannot continue normally; routing chooses a fallback by subtype (the retries of
    `pipeline/run/attempts.py` choose by subtype too)."""


class ProviderUnavailableError(RunFailure):
    """The model provider could not be reached or is overloaded; worth another try later.

    `retry_after` is the wait in seconds the provider asked for (`retry-after`), if it said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ProviderRejectedError(RunFailure):
    """The provider refused the request itself (400, 404, 413, 422 ...). Not retried."""


class ProviderOutputInvalidError(RunFailure):
    """The model answered outside its contract."""


class GuardRejectedError(RunFailure):
    """A deterministic guard refused the model's answer."""


class AttemptsExhaustedError(RunFailure):
    """Every allowed attempt failed; the last error is the cause."""


class BudgetExceededError(RunFailure):
    """The run's token budget is spent."""


class RunCancelledError(RunFailure):
    """The run was cancelled, ended or lost its node lease while this call was in flight.

    Raised by a model call whose bound `CancelToken` (`pipeline.run.cancellation`) was set: the
    provider abandons the request and frees the calling thread within about a second, and the
    attempt is recorded with outcome `cancelled`. Never retried; the node's result is discarded.
    """
