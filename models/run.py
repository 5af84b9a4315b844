"""Run records as the store returns them: runs, orchestration events and model attempts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from models.alert import RunAlert
from models.bundle import FinalAnswer, ImportedAnswer
from models.common import Contract, FallbackType, Intent, RunStatus, Verdict
from models.evaluation import SelfEvaluation
from models.state import NextStep

DEFAULT_TENANT = "default"
"""The owner of runs stored before tenants existed, and of the embedded CLI's runs."""


class RunEvent(Contract):
    """One entry of the orchestration trace of a run."""

    run_id: str = Field(description="Run id.")
    seq: int = Field(ge=1, description="1, 2, 3 ... per run; `events since seq` pages on it.")
    node: str = Field(description="Node that emitted it: parse, gatekeep, verify ...")
    kind: str = Field(description="started, completed, routed, failed, fallback, cancelled ...")
    payload: dict[str, Any] = Field(default_factory=dict, description="Compact details.")
    created_at: datetime | None = Field(default=None, description="Set by the store.")


class LlmAttempt(Contract):
    """One model call attempt; every attempt is a row, retries included."""

    run_id: str = Field(description="Run id.")
    role: str = Field(description="planner, executor, verifier or composer.")
    cycle: int = Field(default=0, ge=0, description="Evidence-retry cycle (0 or 1).")
    attempt_number: int = Field(ge=1, description="1 for the first try, 2 for the retry.")
    prompt_name: str = Field(description="Prompt name.")
    prompt_version: str = Field(description="Prompt version.")
    input_sha256: str = Field(description="sha256 of the byte-stable serialized input.")
    model: str = Field(description="Model id, or offline-<agent>.")
    latency_ms: float = Field(ge=0, description="Wall time of the call.")
    input_tokens: int = Field(default=0, ge=0, description="Input tokens.")
    output_tokens: int = Field(default=0, ge=0, description="Output tokens.")
    cache_read_tokens: int = Field(default=0, ge=0, description="Prompt-cache reads.")
    cache_write_tokens: int = Field(default=0, ge=0, description="Prompt-cache writes.")
    cost_usd: float = Field(default=0.0, ge=0, description="Cost from the price table.")
    outcome: str = Field(description="ok, invalid_output, guard_rejected, error ...")
    error_type: str | None = Field(default=None, description="Error class name, if any.")
    created_at: datetime | None = Field(default=None, description="Set by the store.")


class RunRecord(Contract):
    """A diagnosis_run row as a contract. Its JSON (the HTTP API's) keeps the names the fields
    had before `source` meant a data source: `source` (run, verify or import),
    `source_run_id`, `data_source`."""

    model_config = ConfigDict(serialize_by_alias=True)

    run_id: str = Field(description="Run id.")
    tenant_id: str = Field(description="Owner: sessions, previous turns and reads are its own.")
    session_id: str | None = Field(default=None, description="Conversation session.")
    query: str = Field(description="The user's question.")
    intent: Intent = Field(description="Routed intent.")
    status: RunStatus = Field(description="Run status.")
    node: str | None = Field(default=None, description="Current or last node.")
    version: int = Field(ge=0, description="Bumped on every state change (optimistic lock).")
    verdict: Verdict | None = Field(default=None, description="Effective verdict.")
    fallback_type: FallbackType | None = Field(default=None, description="If it fell back.")
    final_answer: FinalAnswer | None = Field(default=None, description="Released answer.")
    self_evaluation: SelfEvaluation | None = Field(default=None, description="Audit record.")
    origin: str = Field(default="run", serialization_alias="source",
                        description="How the run was made: run (submitted), verify (a bundle) "
                        "or import (another agent's run, checked).")
    origin_run_id: str | None = Field(default=None, serialization_alias="source_run_id",
                                      description="Bundle's run id for verify and import.")
    imported: ImportedAnswer | None = Field(
        default=None, description="The imported agent's answer as written, with its claims' "
        "spans; None for Verity's own runs.")
    alert: RunAlert | None = Field(
        default=None, description="The alert the run was started for (POST "
        "/hooks/alertmanager) and when it resolved; None for other runs.")
    cancel_requested: bool = Field(default=False, description="Cancellation flag.")
    evidence_retry_count: int = Field(default=0, ge=0, description="Evidence retries done.")
    source: str | None = Field(default=None, serialization_alias="data_source",
                               description="Where its tools read data: a source reference.")
    created_at: datetime | None = Field(default=None, description="Creation time (UTC).")
    updated_at: datetime | None = Field(default=None, description="Last change (UTC).")
    finished_at: datetime | None = Field(default=None, description="Terminal time (UTC).")
    deadline_at: datetime | None = Field(
        default=None, description="Past it the run ends FAILED (RUN_DEADLINE_EXCEEDED).")
    reconcile_count: int = Field(
        default=0, ge=0, description="Stalled steps the reconciler re-sent.")
    trace_id: str | None = Field(
        default=None, description="The run's trace id (32 hex) in Verity's own tracing, when "
        "tracing was on at submit.")
    trace_url: str | None = Field(
        default=None, description="Where the trace is shown (`GET /runs/{id}` with "
        "VERITY_TRACE_URL set); never stored.")

    @model_validator(mode="before")
    @classmethod
    def _from_wire(cls, data: Any) -> Any:
        """Read the JSON form back (the HTTP API's): its names predate `origin`."""
        if isinstance(data, dict) and "data_source" in data and "origin" not in data:
            data = dict(data)
            data["origin"] = data.pop("source", "run")
            if "source_run_id" in data:
                data["origin_run_id"] = data.pop("source_run_id")
            data["source"] = data.pop("data_source")
        return data


class RunHead(Contract):
    """The few columns a node needs to decide whether to run: read on every task."""

    run_id: str = Field(description="Run id.")
    tenant_id: str = Field(description="Owner; its session's previous turn is looked up in it.")
    status: RunStatus = Field(description="Run status.")
    version: int = Field(ge=0, description="Optimistic-lock version.")
    node: str | None = Field(default=None, description="Last committed node.")
    cancel_requested: bool = Field(default=False, description="Cancellation flag.")
    source: str | None = Field(default=None, description="Where its tools read data.")
    session_id: str | None = Field(default=None, description="Conversation session.")


class StalledRun(Contract):
    """A PENDING or RUNNING run with no progress for a while and no live lease: what the
    reconciler re-sends, cancels or fails."""

    run_id: str = Field(description="Run id.")
    status: RunStatus = Field(description="PENDING or RUNNING.")
    version: int = Field(ge=0, description="The version its stored next step runs at.")
    updated_at: datetime = Field(description="Last progress (UTC); a claim is conditional on it.")
    cancel_requested: bool = Field(default=False, description="Cancellation flag.")
    reconcile_count: int = Field(default=0, ge=0, description="Times re-sent before.")
    next: NextStep | None = Field(
        default=None, description="The stored next step; None when the state has none.")
