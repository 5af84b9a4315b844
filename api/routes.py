"""The endpoints: runs, their events, batches, sources and health. Every one but healthz and
readyz acts as the caller's tenant; another tenant's run or batch is a 404 like an unknown one.
Blocking store and broker calls run in worker threads.

Three routers: `router` (authenticated before anything else is read), `metered` (also spends
from the token's rate budget before the body is parsed: the endpoints that create runs) and
`public` (health). Every integer a caller gives is bounded (at most MAX_INT32): a larger one is
a 422, not a store error."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import WithJsonSchema
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from api.deps import Authenticated, CallerDep, Metered, state_of
from api.schemas import (
    BatchReport,
    Cancelled,
    CreateBatch,
    CreateCheck,
    CreatedRun,
    CreateRun,
    DeliveryList,
    ErrorBody,
    EventPage,
    Health,
    OnDisconnect,
    RunPage,
    SourceList,
    VerdictLabel,
)
from api.sources import list_sources, source_name
from api.sse import EventStream, named_frame
from models.batch import BatchRecord, Selection
from models.bundle import RunBundle
from models.check import CheckReport
from models.common import MAX_INT32, RunStatus, UtcTime
from models.run import RunRecord
from pipeline.errors import InputError

router = APIRouter(route_class=Authenticated)
metered = APIRouter(route_class=Metered)
public = APIRouter()

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 404, 413, 422, 429, 503)}
_SSE: dict[int | str, dict[str, Any]] = {200: {"content": {"text/event-stream": {}},
              "description": "One `run_event` per event (id = its seq), `: ping` comments, "
              "then `end`."}}


def _links(run_id: str) -> dict[str, str]:
    base = f"/runs/{run_id}"
    return {"self": base, "events": f"{base}/events", "cancel": f"{base}/cancel",
            "bundle": f"{base}/bundle"}


# -- runs -------------------------------------------------------------------------------------

@metered.post("/runs", status_code=202, response_model=CreatedRun, tags=["runs"],
              responses={**_ERRORS, **_SSE})
async def create_run(body: CreateRun, request: Request, who: CallerDep,
                     stream: Annotated[bool, Query(
                         description="Answer with the run's events (SSE); the run is cancelled "
                         "if this client goes away, unless on_disconnect=continue.")] = False,
                     ) -> Response:
    """Enqueue a run; 202 with its id, or (`?stream=true` or `on_disconnect=cancel`) its
    events as they happen. Counted against the token's runs per minute, as is a body refused
    (see `api.deps`)."""
    state = state_of(request)
    client = who.client

    def submit() -> str:
        return client.submit(
            body.question, session_id=body.session, source=source_name(body.source),
            at=body.options.at, deadline_s=body.options.deadline_s)

    # one hop to the thread pool for the source and the submit
    run_id = await run_in_threadpool(submit)
    mode = body.options.on_disconnect or (
        OnDisconnect.CANCEL if stream else OnDisconnect.CONTINUE)
    headers = {"location": f"/runs/{run_id}"}
    if not stream and mode is OnDisconnect.CONTINUE:
        created = CreatedRun(run_id=run_id, status=RunStatus.PENDING, links=_links(run_id))
        return JSONResponse(created.model_dump(mode="json"), status_code=202, headers=headers)

    async def frames() -> AsyncGenerator[bytes, None]:
        yield named_frame("created", {"run_id": run_id, "links": _links(run_id)})
        async for frame in state.hub.frames(client, run_id, after=0):
            yield frame

    async def cancel() -> None:
        await run_in_threadpool(client.cancel, run_id)

    return EventStream(frames(), headers={**headers, "x-verity-run-id": run_id},
                       on_disconnect=cancel if mode is OnDisconnect.CANCEL else None)


@router.get("/runs/{run_id}", response_model=RunRecord, tags=["runs"], responses=_ERRORS)
def get_run(run_id: str, request: Request, who: CallerDep) -> RunRecord:
    """The run as stored now; with VERITY_TRACE_URL set, a traced run links its trace."""
    record = who.client.get(run_id)
    template = state_of(request).settings.trace_url
    if template and record.trace_id:
        return record.model_copy(update={
            "trace_url": template.replace("{trace_id}", record.trace_id)})
    return record


@router.get("/runs", response_model=RunPage, tags=["runs"], responses=_ERRORS)
def list_runs(
    request: Request, who: CallerDep,
    since: Annotated[UtcTime | None, Query(description="Created at or after (ISO 8601).")] = None,
    until: Annotated[UtcTime | None, Query(description="Created before (ISO 8601).")] = None,
    session: Annotated[str | None, Query(description="Only this session's runs.")] = None,
    verdict: Annotated[list[VerdictLabel] | None, Query(
        description="PASS, LOW_CONFID, REJECT or null (no verdict); repeatable.")] = None,
    status: Annotated[list[RunStatus] | None, Query(description="Run status; repeatable.")] = None,
    model: Annotated[list[str] | None, Query(description="A model the run used.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_INT32, description="Page size (above "
                                "VERITY_API_PAGE_MAX: that many).")] = 20,
    cursor: Annotated[str | None, Query(
        description="`next_cursor` of the page before (opaque; another value is 422).",
        json_schema_extra={"pattern": "^[A-Za-z0-9_-]{1,512}$"})] = None,
) -> RunPage:
    """The tenant's runs, newest first (the filters of `verity runs`), in keyset pages."""
    size = min(limit, state_of(request).settings.page_max)
    selection = Selection(since=since, until=until, session_id=session,
                          verdicts=list(verdict or []), statuses=status or [],
                          models=model or [], limit=size + 1)
    found = who.client.runs(selection, after=_decode_cursor(cursor))
    page, more = found[:size], len(found) > size
    return RunPage(runs=page, next_cursor=_encode_cursor(page[-1]) if more else None)


def _encode_cursor(record: RunRecord) -> str:
    assert record.created_at is not None
    raw = json.dumps([record.created_at.isoformat(), record.run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        moment, run_id = json.loads(raw)
        at = datetime.fromisoformat(moment)
        if at.tzinfo is None or not isinstance(run_id, str):
            raise ValueError(cursor)
        at.astimezone(UTC)  # a forged one may not fit in UTC
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError, OverflowError):
        raise InputError("cursor: not a cursor this API gave") from None
    return at, run_id


@router.post("/runs/{run_id}/cancel", response_model=Cancelled, tags=["runs"],
             responses=_ERRORS)
def cancel_run(run_id: str, who: CallerDep) -> Cancelled:
    """Cancel: nothing new starts, an in-flight model call is interrupted, nothing is
    released; `cancelled` is False if the run had already ended."""
    return Cancelled(id=run_id, cancelled=who.client.cancel(run_id))


_EVENT_ID = {"type": "integer", "minimum": 0, "maximum": MAX_INT32}
"""Last-Event-ID as the document says it: sent, it is a number (absent, it is no header)."""


@router.get("/runs/{run_id}/events", tags=["runs"], response_model=EventPage,
            responses={**_ERRORS, **_SSE})
async def run_events(
    run_id: str, request: Request, who: CallerDep,
    after: Annotated[int, Query(ge=0, le=MAX_INT32,
                                description="Events with a seq above this.")] = 0,
    follow: Annotated[bool, Query(
        description="Stream (SSE) until the run ends; false: one JSON page now.")] = True,
    last_event_id: Annotated[int | None, Header(
        alias="Last-Event-ID", ge=0, le=MAX_INT32,
        description="Resume a stream after this event id (wins over `after`)."),
        WithJsonSchema(_EVENT_ID)] = None,
) -> Response:
    """The run's events: an SSE stream (resumable with Last-Event-ID) or one JSON page.
    Following a run never changes it: a viewer may go away at any time."""
    client = who.client
    start = after if last_event_id is None else last_event_id
    if not follow:
        status, events = await run_in_threadpool(lambda: client.follow(run_id, after=start))
        page = EventPage(run_id=run_id, status=status, events=events)
        return JSONResponse(page.model_dump(mode="json"))
    await run_in_threadpool(client.get, run_id)  # 404 before the stream starts
    return EventStream(state_of(request).hub.frames(client, run_id, after=start))


@router.get("/runs/{run_id}/deliveries", response_model=DeliveryList, tags=["runs"],
            responses=_ERRORS)
def run_deliveries(run_id: str, who: CallerDep) -> DeliveryList:
    """The run's notification deliveries: target (no secrets), status, every attempt."""
    return DeliveryList(run_id=run_id, deliveries=who.client.deliveries(run_id))


@router.get("/runs/{run_id}/bundle", response_model=RunBundle, tags=["runs"],
            responses={**_ERRORS, 409: {"model": ErrorBody}})
def run_bundle(run_id: str, who: CallerDep) -> RunBundle:
    """The run as a bundle `verity verify` accepts (409 before its Executor has answered)."""
    return who.client.bundle(run_id)


# -- batches ----------------------------------------------------------------------------------

@router.post("/batches", status_code=202, response_model=BatchRecord, tags=["batches"],
             responses=_ERRORS)
def create_batch(body: CreateBatch, who: CallerDep) -> BatchRecord:
    """Re-verify the tenant's ended runs `selection` picks with today's prompts and rules."""
    return who.client.reverify(body.selection, provider=body.provider,
                               message_batches=body.message_batches, chunk_size=body.chunk_size)


@router.get("/batches/{batch_id}", response_model=BatchRecord, tags=["batches"],
            responses=_ERRORS)
def get_batch(batch_id: str, who: CallerDep) -> BatchRecord:
    """The batch as stored now."""
    return who.client.batch(batch_id)


@router.get("/batches/{batch_id}/report", response_model=BatchReport, tags=["batches"],
            responses=_ERRORS)
def batch_report(batch_id: str, who: CallerDep) -> dict[str, Any]:
    """What changed: the verdict transition matrix and each item's outcome."""
    return who.client.batch_report(batch_id)


@router.post("/batches/{batch_id}/cancel", response_model=Cancelled, tags=["batches"],
             responses=_ERRORS)
def cancel_batch(batch_id: str, who: CallerDep) -> Cancelled:
    """Stop the batch: no new item starts."""
    return Cancelled(id=batch_id, cancelled=who.client.cancel_batch(batch_id))


@router.post("/batches/{batch_id}/resume", response_model=BatchRecord, tags=["batches"],
             responses=_ERRORS)
def resume_batch(batch_id: str, who: CallerDep) -> BatchRecord:
    """Send the batch's items left again; judged items are never judged twice."""
    return who.client.resume(batch_id)


# -- other agents' answers -------------------------------------------------------------------

@metered.post("/checks", status_code=201, response_model=CheckReport, tags=["checks"],
              responses=_ERRORS)
def create_check(body: CreateCheck, who: CallerDep) -> JSONResponse:
    """Check another agent's answer claim by claim against the tool output it was given; the
    check is stored as one of the tenant's runs (`GET /runs/{run_id}`, `GET /checks/{run_id}`).
    Counted against the token's runs per minute, as a run is (a body refused too)."""
    report = who.client.check(
        format=body.format, transcript=body.transcript_text(), answer=body.answer,
        evidence=[(e.name, e.content) for e in body.evidence], question=body.question,
        provider=body.provider)
    return JSONResponse(report.model_dump(mode="json"), status_code=201,
                        headers={"location": f"/checks/{report.run_id}"})


@router.get("/checks/{run_id}", response_model=CheckReport, tags=["checks"],
            responses=_ERRORS)
def get_check(run_id: str, who: CallerDep) -> CheckReport:
    """A stored check: the imported answer with each claim's judgement and bindings."""
    return who.client.check_report(run_id)


# -- sources and health -----------------------------------------------------------------------

@router.get("/sources", response_model=SourceList, tags=["sources"], responses=_ERRORS)
def sources(who: CallerDep) -> SourceList:
    """What a run's `source` may name."""
    del who
    return SourceList(sources=list_sources())


@public.get("/healthz", response_model=Health, tags=["health"])
def healthz() -> Health:
    """The process answers."""
    return Health(status="ok")


@public.get("/readyz", response_model=Health, tags=["health"],
            responses={503: {"model": Health}})
def readyz(request: Request) -> Response:
    """The database and the broker answer (503 when either does not)."""
    found = state_of(request).tokens.check_ready()
    checks = {name: "ok" if reason is None else "unavailable" for name, reason in found.items()}
    ready = all(reason is None for reason in found.values())
    body = Health(status="ok" if ready else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if ready else 503)
