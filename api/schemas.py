"""The HTTP API's request and response bodies. Stored things travel as the contracts of
`models/` (RunRecord, RunEvent, RunBundle, BatchRecord, Selection); these wrap them."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from models.batch import BatchRecord, Selection
from models.bundle import ImportFormat
from models.common import RunStatus, UtcTime
from models.delivery import Delivery
from models.run import RunEvent, RunRecord

VerdictLabel = Literal["PASS", "LOW_CONFID", "REJECT", "null"]
"""A verdict as a filter names it; `null` is a run without one."""

ProviderName = Literal["offline", "anthropic"]
"""Who judges a batch's items."""


class Body(BaseModel):
    """Base of request bodies: unknown fields are errors (422), not silently dropped."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _unicode_only(self) -> Self:
        # JSON may escape NUL (\\u0000) and lone surrogates (\\udc80), which no database
        # column stores: 422 here, not a 500 from the store
        _check_unicode(self.model_dump())
        return self


def _check_unicode(value: Any) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_unicode(key)
            _check_unicode(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_unicode(item)


class OnDisconnect(StrEnum):
    """What happens to a run when the request that created it goes away."""

    CONTINUE = "continue"
    CANCEL = "cancel"


class RunOptions(Body):
    """Options of a new run."""

    deadline_s: float | None = Field(
        default=None, gt=0, le=86400, description="The run must end within this many seconds "
        "(default VERITY_RUN_DEADLINE_S), else it ends FAILED.")
    at: UtcTime | None = Field(
        default=None, description="The time the question is about (ISO 8601; default now): "
        "tools' default windows end here.")
    on_disconnect: OnDisconnect | None = Field(
        default=None, description="`cancel`: the response streams the run's events and the run "
        "is cancelled if this client goes away before it ends (the default with "
        "`?stream=true`); `continue`: it runs on.")


class CreateRun(Body):
    """`POST /runs`."""

    question: str = Field(min_length=1, max_length=4000, description="The user's question.")
    session: str | None = Field(
        default=None, min_length=1, max_length=128,
        description="The tenant's session: its latest successful diagnosis is the previous turn.")
    source: str = Field(min_length=1, max_length=200,
                        description="Where the run's tools read data: a name `GET /sources` lists.")
    options: RunOptions = Field(default_factory=RunOptions, description="Run options.")


class CreatedRun(BaseModel):
    """A run accepted: it runs on the workers; follow it at `events`."""

    run_id: str = Field(description="Run id.")
    status: RunStatus = Field(description="PENDING.")
    links: dict[str, str] = Field(description="self, events, cancel, bundle.")


class RunPage(BaseModel):
    """One page of the tenant's runs, newest first."""

    runs: list[RunRecord] = Field(description="The page.")
    next_cursor: str | None = Field(
        default=None, description="Pass as `cursor` for the next page; None on the last one.")


class EventPage(BaseModel):
    """The run's events after `after` (`GET /runs/{id}/events?follow=false`)."""

    run_id: str = Field(description="Run id.")
    status: RunStatus = Field(description="The run's status when read.")
    events: list[RunEvent] = Field(description="Events with seq > after, ascending.")


class DeliveryList(BaseModel):
    """The run's notification deliveries (`GET /runs/{id}/deliveries`), oldest first."""

    run_id: str = Field(description="Run id.")
    deliveries: list[Delivery] = Field(description="One per notified target, with attempts.")


class Cancelled(BaseModel):
    """The answer to a cancel."""

    id: str = Field(description="The run or batch id.")
    cancelled: bool = Field(description="False if it had already ended.")


class CreateBatch(Body):
    """`POST /batches`: re-verify the tenant's ended runs that `selection` picks."""

    selection: Selection = Field(default_factory=Selection, description="Which runs.")
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        # Message Batches are Claude's: the schema says so, as the server does (422 otherwise)
        "if": {"properties": {"message_batches": {"const": True}},
               "required": ["message_batches"]},
        "then": {"properties": {"provider": {"const": "anthropic"}}, "required": ["provider"]},
    })

    provider: ProviderName | None = Field(
        default=None, description="offline or anthropic (default: the server's provider).")
    message_batches: bool = Field(
        default=False, description="Claude through Message Batches (provider anthropic).")
    chunk_size: int = Field(default=50, ge=1, le=1000, description="Items per chunk task.")


class EvidenceFile(Body):
    """One tool output of a plain-files check: a `.json` name is read as JSON, any other as
    text lines."""

    name: str = Field(min_length=1, max_length=255, description="Its file name.")
    content: str = Field(description="Its text.")


class CreateCheck(Body):
    """`POST /checks`: another agent's answer to check, claim by claim, against the tool
    output it was given. `anthropic`, `openai` and `otel` carry the `transcript` (a Messages
    or Chat Completions transcript, or OTLP JSON lines); `files` carries the `answer` and its
    `evidence`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        # which inputs go with which format, as the validator below says
        "if": {"properties": {"format": {"const": "files"}}, "required": ["format"]},
        "then": {"required": ["answer"],
                 "properties": {"answer": {"type": "string"}, "transcript": {"type": "null"}}},
        "else": {"required": ["transcript"],
                 "properties": {"transcript": {"not": {"type": "null"}},
                                "answer": {"type": "null"}, "evidence": {"maxItems": 0}}},
    })

    format: ImportFormat = Field(description="anthropic, openai, otel or files.")
    transcript: str | dict[str, Any] | list[Any] | None = Field(
        default=None, description="The transcript or trace: its text, or its JSON.")
    answer: str | None = Field(default=None, description="The answer (format files).")
    evidence: list[EvidenceFile] = Field(
        default_factory=list, max_length=256, description="Tool outputs (format files).")
    question: str | None = Field(default=None, min_length=1, max_length=4000,
                                 description="The question answered (else the transcript's).")
    provider: ProviderName | None = Field(
        default=None, description="offline or anthropic (default: the server's provider).")

    @model_validator(mode="after")
    def _inputs_of_the_format(self) -> Self:
        if self.format == "files":
            if self.answer is None or self.transcript is not None:
                raise ValueError("format files takes answer (and evidence), not transcript")
        elif self.transcript is None or self.answer is not None or self.evidence:
            raise ValueError(f"format {self.format} takes transcript, not answer or evidence")
        return self

    def transcript_text(self) -> str | None:
        """The transcript as text (JSON sent as JSON is written back as text)."""
        if self.transcript is None or isinstance(self.transcript, str):
            return self.transcript
        return json.dumps(self.transcript, ensure_ascii=False)


class BatchReport(BaseModel):
    """A batch with what changed (`pipeline.reverify.Report.as_json`)."""

    model_config = ConfigDict(extra="allow")

    batch: BatchRecord = Field(description="The batch.")


class SourceInfo(BaseModel):
    """A source a run can name."""

    name: str = Field(
        description="What to pass as `source`, e.g. scenario:checkout-pool-exhaustion.")
    kind: str = Field(description="scenario (a sample incident's folder) or backends.")
    title: str | None = Field(default=None, description="Title or description.")
    backends: list[str] = Field(default_factory=list,
                                description="prometheus, alertmanager, loki, kubernetes, ...")
    question: str | None = Field(default=None, description="A question it answers.")
    service: str | None = Field(default=None, description="Service in focus.")


class SourceList(BaseModel):
    """`GET /sources`."""

    sources: list[SourceInfo] = Field(description="Every source.")


class Health(BaseModel):
    """`GET /healthz` and `GET /readyz`."""

    status: str = Field(description="ok, or unavailable.")
    checks: dict[str, Any] = Field(
        default_factory=dict, description="readyz: database and broker, each ok or the reason.")


class ErrorBody(BaseModel):
    """Every error: one line, never a stack trace or internal text."""

    error: str = Field(description="What went wrong, in one line.")
