"""Verity's own traces: a run is one trace (its id stored on the run), with a span per node
under the run's root span, a GenAI `chat` span per model call under its node and an
`execute_tool` span per tool call carrying `gen_ai.tool.call.id`; on the Claude path the chat
spans carry the provider's tokens and cache reads. Off without an endpoint; with one, spans go
out over real OTLP/HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from fake_anthropic import FakeAnthropic
from models.run import RunRecord
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.run.runtime import Runtime
from pipeline.telemetry import tracing
from tests.providers.claude_like import answer_like_claude
from tests.providers.test_fake_runs import TENANT, drive
from tests.telemetry.otlp_receiver import OtlpReceiver

SCENARIO = "checkout-pool-exhaustion"


@pytest.fixture(autouse=True)
def no_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    yield
    tracing.use_processor(None)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    spans = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(spans))
    return spans


def offline(tmp_path: Path) -> Runtime:
    return build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path / 'r.db'}"))


def run_of(runtime: Runtime, scenario: str = SCENARIO) -> RunRecord:
    return runtime.store.get_run(drive(runtime, scenario), tenant_id=TENANT)


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def assert_one_trace(runtime: Runtime, run: RunRecord,
                     spans: tuple[ReadableSpan, ...]) -> None:
    """One trace, the run's; a root, a span per node under it, chat spans under nodes, a tool
    span per stored tool call."""
    assert run.trace_id is not None
    assert {format(s.context.trace_id, "032x") for s in spans} == {run.trace_id}
    (root,) = by_name(spans, "verity.run")
    assert root.parent is None
    assert format(root.context.span_id, "016x") == tracing.run_ids(run.run_id)[1]
    assert root.attributes is not None
    assert root.attributes["verity.run.status"] == run.status.value
    nodes = by_name(spans, "verity.node ")
    ran = {e.node for e in runtime.store.events_since(run.run_id, tenant_id=TENANT)} - {"submit"}
    assert {s.name.removeprefix("verity.node ") for s in nodes} == ran
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id
               for s in nodes)
    node_ids = {s.context.span_id for s in nodes}
    chats = by_name(spans, "chat ")
    attempts = runtime.store.list_attempts(run.run_id)
    assert len(chats) == len(attempts) > 0
    assert all(s.parent is not None and s.parent.span_id in node_ids for s in chats)
    tools = by_name(spans, "execute_tool ")
    calls = runtime.store.list_invocations(run.run_id)
    assert sorted(str((s.attributes or {})["gen_ai.tool.call.id"]) for s in tools) == sorted(
        c.tool_call_id for c in calls)
    assert len(calls) > 0


def test_an_offline_run__is_one_trace_with_a_span_per_node(
        tmp_path: Path, exporter: InMemorySpanExporter) -> None:
    runtime = offline(tmp_path)
    run = run_of(runtime)
    spans = exporter.get_finished_spans()
    assert_one_trace(runtime, run, spans)
    for chat in by_name(spans, "chat "):
        attributes = chat.attributes or {}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "verity.offline"
        assert str(attributes["gen_ai.request.model"]).startswith("offline-")
    runtime.close()


def test_claude_calls__carry_the_genai_model_and_token_attributes(
        tmp_path: Path, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with FakeAnthropic() as fake:
        answer_like_claude(fake)
        runtime = build_runtime(VeritySettings(
            database_url=f"sqlite:///{tmp_path / 'c.db'}", provider="anthropic",
            anthropic_api_key="sk-test", anthropic_base_url=fake.base_url))  # type: ignore[arg-type]
        run = run_of(runtime)
    spans = exporter.get_finished_spans()
    assert_one_trace(runtime, run, spans)
    attempts = {(a.role, a.attempt_number, a.cycle): a
                for a in runtime.store.list_attempts(run.run_id)}
    chats = by_name(spans, "chat ")
    assert {str((s.attributes or {})["gen_ai.agent.name"]) for s in chats} >= {
        "planner", "executor", "verifier", "composer"}
    for chat in chats:
        attributes = chat.attributes or {}
        attempt = next(a for a in attempts.values()
                       if a.role == attributes["gen_ai.agent.name"]
                       and a.attempt_number == attributes["verity.model.attempt"])
        assert attributes["gen_ai.provider.name"] == "anthropic"
        assert attributes["gen_ai.request.model"] == attempt.model
        assert attributes["gen_ai.usage.input_tokens"] == attempt.input_tokens > 0
        assert attributes["gen_ai.usage.output_tokens"] == attempt.output_tokens > 0
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == attempt.cache_read_tokens
    assert all(str(c.tool_call_id).startswith("toolu_")
               for c in runtime.store.list_invocations(run.run_id))
    runtime.close()


def test_without_an_endpoint__tracing_is_off_and_no_trace_id_is_stored(tmp_path: Path) -> None:
    assert not tracing.enabled()
    runtime = offline(tmp_path)
    assert run_of(runtime).trace_id is None
    assert tracing._STATE.tracer is None  # nothing was built
    runtime.close()


def test_with_the_sdk_disabled__an_endpoint_turns_nothing_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not tracing.enabled()
    runtime = offline(tmp_path)
    assert run_of(runtime).trace_id is None
    assert tracing._STATE.tracer is None
    runtime.close()


def test_with_an_endpoint__spans_go_out_over_otlp_http(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        runtime = offline(tmp_path)
        run = run_of(runtime)
        tracing.flush()
        spans = receiver.wait_for(lambda got: any(s.name == "verity.run" for s in got))
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert {s.service for s in spans} == {"verity"}
    names = {s.name for s in spans}
    assert {"verity.node plan", "verity.node execute", "verity.node verify",
            "verity.node finalize"} <= names
    assert any(s.attributes.get("gen_ai.tool.call.id") for s in spans)
    runtime.close()


def test_a_model_call_outside_any_node__is_a_child_of_its_runs_root(
        exporter: InMemorySpanExporter) -> None:
    from models.run import LlmAttempt
    from pipeline import telemetry

    attempt = LlmAttempt(run_id="f" * 32, role="verifier", attempt_number=1, prompt_name="v",
                         prompt_version="1", input_sha256="d", model="m", latency_ms=1.0,
                         outcome="ok")
    telemetry.model_call(attempt, provider="anthropic", started_ns=1_000)
    (chat,) = exporter.get_finished_spans()
    trace_id, root_span_id = tracing.run_ids(attempt.run_id)
    assert format(chat.context.trace_id, "032x") == trace_id
    assert chat.parent is not None and format(chat.parent.span_id, "016x") == root_span_id


def test_with_the_sampler_always_off__no_span_is_written_and_no_trace_id_is_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    spans = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(spans))
    runtime = offline(tmp_path)
    assert run_of(runtime).trace_id is None
    assert spans.get_finished_spans() == ()
    runtime.close()


@pytest.mark.parametrize("sampler", ["traceidratio", "parentbased_traceidratio"])
def test_a_ratio_sampler__traces_a_share_of_runs_each_whole_or_not_at_all(
        sampler: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline import telemetry

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    spans = InMemorySpanExporter()
    tracing.use_processor(SimpleSpanProcessor(spans))
    run_ids = [f"{i:032x}" for i in range(400)]
    kept = {run_id for run_id in run_ids if telemetry.trace_id(run_id) is not None}
    for run_id in run_ids:
        with telemetry.node(run_id, "plan"):
            pass
    assert 60 <= len(kept) <= 140
    assert {format(s.context.trace_id, "032x") for s in spans.get_finished_spans()} == {
        tracing.run_ids(run_id)[0] for run_id in kept}


@pytest.mark.parametrize("setting", [{"OTEL_TRACES_SAMPLER": "jaeger_remote"},
                                     {"OTEL_TRACES_SAMPLER": "traceidratio",
                                      "OTEL_TRACES_SAMPLER_ARG": "half"},
                                     {"OTEL_TRACES_SAMPLER": "traceidratio",
                                      "OTEL_TRACES_SAMPLER_ARG": "1.5"}])
def test_an_unknown_sampler_or_share__traces_every_run(
        setting: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in setting.items():
        monkeypatch.setenv(name, value)
    assert tracing.sampled_share() == 1.0


def test_a_node_that_raises__is_an_error_span_with_the_exception_event(
        exporter: InMemorySpanExporter) -> None:
    from pipeline import telemetry

    with pytest.raises(LookupError), telemetry.node("e" * 32, "plan"):
        raise LookupError("no such row")
    (node,) = exporter.get_finished_spans()
    assert node.status.status_code is StatusCode.ERROR
    assert node.status.description == "LookupError: no such row"
    (event,) = node.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.type"] == "LookupError"
    assert "no such row" in str(event.attributes["exception.stacktrace"])
    assert "verity.node.outcome" not in (node.attributes or {})


def test_a_process_that_exits__exports_the_spans_it_still_holds() -> None:
    import os
    import subprocess
    import sys

    with OtlpReceiver() as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
               "OTEL_BSP_SCHEDULE_DELAY": "600000"}  # no export but the one at exit
        subprocess.run([sys.executable, "-c", (
            "from pipeline import telemetry\n"
            "with telemetry.node('d' * 32, 'plan'):\n"
            "    pass\n")], env=env, check=True, timeout=60)
        spans = receiver.wait_for(bool, timeout=10)
    assert [s.name for s in spans] == ["verity.node plan"]
