"""Verity's own traces: OpenTelemetry spans, exported over OTLP/HTTP when an endpoint is set.

Off by default. With `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
`OTEL_EXPORTER_OTLP_ENDPOINT` (the base; `/v1/traces` is appended) in the environment, each
process builds one batch span processor over the SDK's OTLP/HTTP exporter on first use; without
either, `enabled()` is False and nothing here builds a span.

A run is one trace across processes: its trace id and the id of its root span are derived from
the run id (`run_ids`; run ids are random uuid4 hex), so every process that touches the run
knows them without reading anything or passing them in messages. Each node's span is a child of
that root wherever it runs; model calls are children of their node's span, tool calls of the
root. The root span itself is written when the run ends (`end_run_span`), from submit to end,
under those ids.

A run is traced whole or not at all: `OTEL_TRACES_SAMPLER` (`always_on`, the default
`parentbased_always_on`, `always_off`, `traceidratio` with `OTEL_TRACES_SAMPLER_ARG` the share,
or their `parentbased_` forms: a run's root has no parent) decides from the run's trace id as
the SDK's `TraceIdRatioBased` does, so every process with the same setting makes the same
decision (`traced`).

Every span's parent is known when it is made, so spans are written as finished SDK
`ReadableSpan`s straight to the processor, with no SDK `Tracer`: the tracer's per-span work
(a sampler per span, span limits, cleaning each attribute, attaching and detaching an
OpenTelemetry context) was half of tracing's cost (bench/README.md) for spans whose parent,
sampling and attributes are already settled here. What goes out over OTLP is the same; the
current node span is this module's own context variable, so nothing outside Verity nests spans
under ours (nothing else in Verity is instrumented).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import os
import random
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

__all__ = ["enabled", "end_run_span", "run_ids", "span", "timed_span", "traced"]

Attributes = Mapping[str, Any]
_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_CURRENT: ContextVar[SpanContext | None] = ContextVar("verity_current_span", default=None)
"""The span model calls made now are children of (the node being run), in this thread."""


def endpoint() -> str | None:
    """The configured OTLP/HTTP traces endpoint, if any; none while `OTEL_SDK_DISABLED` is
    true (the SDK's switch for all of it)."""
    url = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
           or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    if not url or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None  # without an endpoint (tracing off, every hook asks) read nothing more
    return url


class _Resource(Resource):
    """The process's resource, hashed once: the OTLP encoder groups spans by resource,
    hashing each span's, and `Resource.__hash__` writes the attributes as JSON every time
    (a fifth of encoding a span)."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class _Tracer:
    """Writes finished spans of this process (service `OTEL_SERVICE_NAME`, default `verity`)
    to its processor."""

    def __init__(self, processor: SpanProcessor) -> None:
        self.processor = processor
        self.resource = _Resource(Resource.create({
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "verity"}))
        self.scope = InstrumentationScope("verity")

    def write(self, name: str, context: SpanContext, *, parent: SpanContext | None,
              start_ns: int, end_ns: int, attributes: dict[str, Any],
              status: Status | None = None, events: tuple[Event, ...] = ()) -> None:
        """Hand one finished span to the processor; a span it cannot take is dropped (a log
        line), never raised into the run."""
        try:
            self.processor.on_end(ReadableSpan(
                name, context, parent, self.resource, attributes, events,
                status=status or Status(StatusCode.UNSET), start_time=start_ns,
                end_time=end_ns, instrumentation_scope=self.scope))
        except Exception:
            _LOG.warning("telemetry: span %s not written", name, exc_info=True)


class _Tracing:
    """The process's tracer, built on first use when an endpoint is configured."""

    def __init__(self) -> None:
        self.tracer: _Tracer | None = None
        self.bound: int | None = None
        """Runs whose trace id's low 64 bits are below it are traced (read on first use)."""

    def build(self, processor: SpanProcessor | None = None) -> _Tracer:
        """The tracer: over `processor`, else a batch processor over the OTLP/HTTP exporter
        (its queue, batch size and delay from the SDK's `OTEL_BSP_*` variables). The processor
        is shut down, exporting what it holds, when the process exits."""
        if processor is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor = BatchSpanProcessor(OTLPSpanExporter())
        atexit.register(processor.shutdown)
        self.tracer = _Tracer(processor)
        return self.tracer


_STATE = _Tracing()


def enabled() -> bool:
    """Whether spans are built in this process (an endpoint, or a test's processor)."""
    return _STATE.tracer is not None or endpoint() is not None


def _tracer() -> _Tracer:
    if _STATE.tracer is not None:
        return _STATE.tracer
    with _LOCK:
        return _STATE.tracer or _STATE.build()


def use_processor(processor: SpanProcessor | None) -> None:
    """Export this process's spans through `processor` (tests: an in-memory exporter); None
    goes back to the environment's endpoint."""
    with _LOCK:
        if _STATE.tracer is not None:
            atexit.unregister(_STATE.tracer.processor.shutdown)
            _STATE.tracer.processor.shutdown()
        _STATE.tracer = None
        _STATE.bound = None
        if processor is not None:
            _STATE.build(processor)


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered now (before a process exits)."""
    if _STATE.tracer is not None:
        _STATE.tracer.processor.force_flush(timeout_ms)


@functools.lru_cache(maxsize=1024)
def run_ids(run_id: str) -> tuple[str, str]:
    """The run's trace id (32 hex) and root span id (16 hex): a digest of its id, never zero."""
    digest = hashlib.sha256(f"verity-trace:{run_id}".encode()).hexdigest()
    trace_id, span_id = digest[:32], digest[32:48]
    return (trace_id if int(trace_id, 16) else "1".rjust(32, "0"),
            span_id if int(span_id, 16) else "1".rjust(16, "0"))


def sampled_share() -> float:
    """The share of runs traced, from `OTEL_TRACES_SAMPLER` (and `_ARG`); an unknown sampler
    or share is logged and every run is traced."""
    name = os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip().lower()
    name = name.removeprefix("parentbased_")
    if name in ("always_on", "always_off"):
        return 1.0 if name == "always_on" else 0.0
    if name != "traceidratio":
        _LOG.warning("telemetry: OTEL_TRACES_SAMPLER=%s is not supported; every run traced", name)
        return 1.0
    try:
        share = float(os.environ.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        _LOG.warning("telemetry: OTEL_TRACES_SAMPLER_ARG is not a share in [0, 1]; every run "
                     "traced")
        return 1.0
    return share


def traced(run_id: str) -> tuple[str, str] | None:
    """The run's ids (`run_ids`) when this process traces and the sampler keeps the run,
    else None."""
    if not enabled():
        return None
    if _STATE.bound is None:
        _STATE.bound = TraceIdRatioBased.get_bound_for_rate(sampled_share())
    ids = run_ids(run_id)
    return ids if int(ids[0], 16) & TraceIdRatioBased.TRACE_ID_LIMIT < _STATE.bound else None


def _root(ids: tuple[str, str]) -> SpanContext:
    return SpanContext(int(ids[0], 16), int(ids[1], 16), is_remote=True, trace_flags=_SAMPLED)


def _child_of(parent: SpanContext) -> SpanContext:
    return SpanContext(parent.trace_id, random.getrandbits(64) or 1, is_remote=False,
                       trace_flags=_SAMPLED)


def _exception(exc: BaseException) -> Event:
    """The semantic conventions' `exception` event, as the SDK's spans record an exception
    that left their block."""
    kind, module = type(exc).__qualname__, type(exc).__module__
    return Event("exception", {
        "exception.type": f"{module}.{kind}" if module and module != "builtins" else kind,
        "exception.message": str(exc),
        "exception.stacktrace": "".join(traceback.format_exception(exc)),
        "exception.escaped": "True"})


@contextmanager
def span(name: str, ids: tuple[str, str], attributes: Attributes) -> Iterator[dict[str, Any]]:
    """A span under the run's root (`ids`: trace id, root span id), timed around the block
    and current in it (model calls made inside are its children). Yields its attributes:
    what the block adds to them before it ends is written with the span; an exception that
    leaves the block marks the span as an error and is recorded on it."""
    parent = _root(ids)
    context = _child_of(parent)
    written = dict(attributes)
    status: Status | None = None
    events: tuple[Event, ...] = ()
    token = _CURRENT.set(context)
    start_ns = time.time_ns()
    try:
        yield written
    except BaseException as exc:
        status = Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        events = (_exception(exc),)
        raise
    finally:
        _CURRENT.reset(token)
        _tracer().write(name, context, parent=parent, start_ns=start_ns,
                        end_ns=time.time_ns(), attributes=written, status=status,
                        events=events)


def timed_span(name: str, ids: tuple[str, str], *, start_ns: int, end_ns: int,
               attributes: Attributes, error: str | None = None) -> None:
    """A finished span from `start_ns` to `end_ns` (epoch ns): a child of the current span
    when it is in the run's trace (`ids`), else of the run's root."""
    root = _root(ids)
    current = _CURRENT.get()
    parent = current if current is not None and current.trace_id == root.trace_id else root
    _tracer().write(name, _child_of(parent), parent=parent, start_ns=start_ns, end_ns=end_ns,
                    attributes=dict(attributes),
                    status=Status(StatusCode.ERROR, error) if error is not None else None)


def end_run_span(ids: tuple[str, str], *, start_ns: int, end_ns: int,
                 attributes: Attributes) -> None:
    """The run's root span, under the ids drawn at submit."""
    root = SpanContext(int(ids[0], 16), int(ids[1], 16), is_remote=False, trace_flags=_SAMPLED)
    _tracer().write("verity.run", root, parent=None, start_ns=start_ns, end_ns=end_ns,
                    attributes=dict(attributes))
