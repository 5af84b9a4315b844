"""Verity's own traces: OpenTelemetry spans, exported over OTLP/HTTP when an endpoint is set.

Off by default. With `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
`OTEL_EXPORTER_OTLP_ENDPOINT` (the base; `/v1/traces` is appended) in the environment, each
process builds one tracer provider with a batch exporter on first use; without either,
`enabled()` is False and nothing here builds a span.

A run is one trace across processes: its trace id and the id of its root span are derived from
the run id (`run_ids`; run ids are random uuid4 hex), so every process that touches the run
knows them without reading anything or passing them in messages. Each node's span is a child of
that root wherever it runs; model calls are children of their node's span, tool calls of the
root. The root span itself is written when the run ends (`end_run_span`), from submit to end,
under those ids.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, TraceFlags

__all__ = ["enabled", "end_run_span", "run_ids", "span", "timed_span"]

Attributes = Mapping[str, Any]
_LOCK = threading.Lock()


def endpoint() -> str | None:
    """The configured OTLP/HTTP traces endpoint, if any."""
    return (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None)


class _PresetIds(RandomIdGenerator):
    """Random ids, except the next ones this thread presets (a run's root span, written at
    its end under the ids drawn at submit)."""

    def __init__(self) -> None:
        self._preset = threading.local()

    def preset(self, trace_id: int, span_id: int) -> None:
        self._preset.ids = (trace_id, span_id)

    def generate_trace_id(self) -> int:
        ids = getattr(self._preset, "ids", None)
        return ids[0] if ids else super().generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._preset, "ids", None)
        if ids:
            self._preset.ids = None
            return int(ids[1])
        return super().generate_span_id()


class _Tracing:
    """The process's tracer, built on first use when an endpoint is configured."""

    def __init__(self) -> None:
        self.ids = _PresetIds()
        self.provider: TracerProvider | None = None
        self.tracer: trace.Tracer | None = None

    def build(self, processor: SpanProcessor | None = None) -> trace.Tracer:
        """The tracer: over `processor`, else an OTLP/HTTP batch exporter."""
        if processor is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor = BatchSpanProcessor(OTLPSpanExporter())
        resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME")
                                    or "verity"})
        self.provider = TracerProvider(resource=resource, id_generator=self.ids)
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer("verity")
        return self.tracer


_STATE = _Tracing()


def enabled() -> bool:
    """Whether spans are built in this process (an endpoint, or a test's processor)."""
    return _STATE.tracer is not None or endpoint() is not None


def _tracer() -> trace.Tracer:
    if _STATE.tracer is not None:
        return _STATE.tracer
    with _LOCK:
        return _STATE.tracer or _STATE.build()


def use_processor(processor: SpanProcessor | None) -> None:
    """Export this process's spans through `processor` (tests: an in-memory exporter); None
    goes back to the environment's endpoint."""
    with _LOCK:
        if _STATE.provider is not None:
            _STATE.provider.shutdown()
        _STATE.provider = _STATE.tracer = None
        if processor is not None:
            _STATE.build(processor)


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered now (before a process exits)."""
    if _STATE.provider is not None:
        _STATE.provider.force_flush(timeout_ms)


def run_ids(run_id: str) -> tuple[str, str]:
    """The run's trace id (32 hex) and root span id (16 hex): a digest of its id, never zero."""
    digest = hashlib.sha256(f"verity-trace:{run_id}".encode()).hexdigest()
    trace_id, span_id = digest[:32], digest[32:48]
    return (trace_id if int(trace_id, 16) else "1".rjust(32, "0"),
            span_id if int(span_id, 16) else "1".rjust(16, "0"))


def _root(trace_id: str, span_id: str) -> Any:
    parent = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


@contextmanager
def span(name: str, ids: tuple[str, str] | None, attributes: Attributes) -> Iterator[Span]:
    """A current span under the run's root (`ids`: trace id, root span id), or under the
    current span when `ids` is None."""
    context = _root(*ids) if ids else None
    with _tracer().start_as_current_span(name, context=context,
                                         attributes=dict(attributes)) as current:
        yield current


def timed_span(name: str, *, start_ns: int, end_ns: int, attributes: Attributes,
               error: str | None = None) -> None:
    """A finished child of the current span, from `start_ns` to `end_ns` (epoch ns)."""
    done = _tracer().start_span(name, start_time=start_ns, attributes=dict(attributes))
    if error is not None:
        done.set_status(trace.Status(trace.StatusCode.ERROR, error))
    done.end(end_time=end_ns)


def end_run_span(ids: tuple[str, str], *, start_ns: int, end_ns: int,
                 attributes: Attributes) -> None:
    """The run's root span, under the ids drawn at submit."""
    _tracer()
    _STATE.ids.preset(int(ids[0], 16), int(ids[1], 16))
    root = _tracer().start_span("verity.run", context=trace.set_span_in_context(
        trace.INVALID_SPAN), start_time=start_ns, attributes=dict(attributes))
    root.end(end_time=end_ns)
