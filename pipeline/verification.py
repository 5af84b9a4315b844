"""`verity verify`: parse → gatekeep → verify → compose (or the fallback) on a run bundle,
through the run's graph (`pipeline/run/graph.py`)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from pydantic import ValidationError

from models.agent import ExecutorStep, KnowledgeAnswer, Plan, Transcript
from models.bundle import RunBundle, RunResult
from models.run import LlmAttempt
from models.state import NextStep, PipelineState, RuntimeState
from pipeline.agents.protocols import Agents
from pipeline.config import VeritySettings
from pipeline.errors import BundleError, BundleTooDeepError
from pipeline.inprocess import MemoryRun, drive
from pipeline.model import Model
from pipeline.rules.routing import Node
from pipeline.run.evaluation import run_result
from pipeline.run.graph import GRAPH, GraphError
from pipeline.run.nodes.common import Event, NodeContext
from pipeline.tools.registry import ToolRegistry


@dataclass
class VerifiedRun:
    """The result of verifying a bundle, with the trace and the model attempts behind it."""

    result: RunResult
    events: list[Event] = field(default_factory=list)
    attempts: list[LlmAttempt] = field(default_factory=list)


def load_bundle(text: str, *, settings: VeritySettings | None = None) -> RunBundle:
    """Parse and validate a bundle within the input limits (`VERITY_BUNDLE_MAX_*` and friends,
    see VeritySettings); every problem is one line in a BundleError."""
    limits = settings or VeritySettings()
    _check_size(text, what="bundle", limit=limits.bundle_max_bytes,
                setting="VERITY_BUNDLE_MAX_BYTES")
    data = _parse_json(text, what="bundle", max_depth=limits.bundle_max_depth)
    if not isinstance(data, dict):
        raise BundleError("bundle must be a JSON object")
    _check_contents(data, limits)
    try:
        bundle = RunBundle.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "bundle"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = f"{where}: {first['msg']}{more}".replace("\n", " ")
        raise BundleError(f"bundle has the wrong shape: {message[:300]}") from None
    seen: set[str] = set()
    for invocation in bundle.invocations:
        if invocation.tool_call_id in seen:
            raise BundleError(f"duplicate tool_call_id {invocation.tool_call_id!r:.120} in bundle")
        seen.add(invocation.tool_call_id)
    return bundle


# A JSON string, as the scanner sees it in text that is already known to be valid JSON.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_TOO_DEEP = object()


def _check_size(text: str, *, what: str, limit: int, setting: str) -> None:
    # A character is one to four bytes: encode only when the length alone cannot decide.
    too_big = len(text) > limit or (
        len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit
    )
    if too_big:
        raise BundleError(f"{what} is larger than {limit} bytes ({setting})")


def _parse_json(text: str, *, what: str, max_depth: int) -> Any:
    """json.loads, with nesting deeper than `max_depth` refused as a BundleError (the C scanner
    raises RecursionError past about a thousand levels; the limit is checked on the text)."""
    try:
        data = json.loads(text)
    except RecursionError:
        data = _TOO_DEEP
    except ValueError as exc:
        raise BundleError(f"{what} is not JSON: {str(exc).splitlines()[0]}") from None
    if data is _TOO_DEEP or _text_depth(text) > max_depth:
        raise BundleTooDeepError(f"{what} nests deeper than {max_depth} levels "
                                 "(VERITY_BUNDLE_MAX_DEPTH)")
    if _SURROGATE_ESCAPE.search(text) and not _encodable(data):
        raise BundleError(f"{what} has a \\u escape of a lone surrogate (not Unicode text)")
    return data


def _encodable(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in valid JSON text, in linear time."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def _value_depth(value: Any) -> int:
    """The deepest nesting of lists and dicts in a parsed JSON value (iteratively)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _longest_string(value: Any) -> int:
    """The length of the longest string (value or key) in a parsed JSON value."""
    longest = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return longest


def _check_contents(data: dict[str, Any], limits: VeritySettings) -> None:
    """Counts and sizes checked on the raw JSON, before validation builds any model."""
    query = data.get("query")
    if isinstance(query, str) and len(query) > limits.query_max_chars:
        raise BundleError(f"query is longer than {limits.query_max_chars} characters "
                          "(VERITY_QUERY_MAX_CHARS)")
    invocations = data.get("invocations")
    if isinstance(invocations, list):
        if len(invocations) > limits.bundle_max_invocations:
            raise BundleError(f"bundle has more than {limits.bundle_max_invocations} invocations "
                              "(VERITY_BUNDLE_MAX_INVOCATIONS)")
        for index, invocation in enumerate(invocations):
            if isinstance(invocation, dict) and isinstance(invocation.get("projection"), dict):
                _check_projection(invocation["projection"], index=index, limits=limits)
    raw = data.get("executor_output_raw")
    if isinstance(raw, str):
        _check_executor_output(raw, limits)


def _check_projection(projection: dict[str, Any], *, index: int, limits: VeritySettings) -> None:
    if _value_depth(projection) > limits.input_projection_max_depth:
        raise BundleTooDeepError(f"invocations.{index}.projection nests deeper than "
                          f"{limits.input_projection_max_depth} levels "
                          "(VERITY_INPUT_PROJECTION_MAX_DEPTH)")
    size = len(json.dumps(projection, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > limits.input_projection_max_bytes:
        raise BundleError(f"invocations.{index}.projection is larger than "
                          f"{limits.input_projection_max_bytes} bytes "
                          "(VERITY_INPUT_PROJECTION_MAX_BYTES)")


def _check_executor_output(raw: str, limits: VeritySettings) -> None:
    """Limits on the stored Executor output. Output that is not JSON, or not an object with a
    claims array, is left alone: the parse step makes it INVALID_OUTPUT, as in a live run."""
    _check_size(raw, what="executor_output_raw", limit=limits.executor_output_max_bytes,
                setting="VERITY_EXECUTOR_OUTPUT_MAX_BYTES")
    try:
        document = _parse_json(raw, what="executor_output_raw", max_depth=limits.bundle_max_depth)
    except BundleTooDeepError:
        raise
    except BundleError:
        return
    longest = _longest_string(document)
    if longest > limits.executor_text_max_chars:
        raise BundleError(f"executor output has a string longer than "
                          f"{limits.executor_text_max_chars} characters "
                          "(VERITY_EXECUTOR_TEXT_MAX_CHARS)")
    claims = document.get("claims") if isinstance(document, dict) else None
    if not isinstance(claims, list):
        return
    if len(claims) > limits.bundle_max_claims:
        raise BundleError(f"executor output has more than {limits.bundle_max_claims} claims "
                          "(VERITY_BUNDLE_MAX_CLAIMS)")
    bindings = [binding for claim in claims if isinstance(claim, dict)
                and isinstance(claim.get("evidence_bindings"), list)
                for binding in claim["evidence_bindings"]]
    if len(bindings) > limits.bundle_max_bindings:
        raise BundleError(f"executor output has more than {limits.bundle_max_bindings} evidence "
                          "bindings (VERITY_BUNDLE_MAX_BINDINGS)")
    for binding in bindings:
        path = binding.get("path") if isinstance(binding, dict) else None
        if isinstance(path, str):
            _check_path(path, limits)


def _check_path(path: str, limits: VeritySettings) -> None:
    if len(path) > limits.path_max_length:
        raise BundleError(f"an evidence path is longer than {limits.path_max_length} characters "
                          "(VERITY_PATH_MAX_LENGTH)")
    digits = limits.path_max_index_digits + 1
    if re.search(rf"\[[ \t\n\r]*-?[0-9]{{{digits}}}", path):
        raise BundleError(f"an evidence path has an index of more than "
                          f"{limits.path_max_index_digits} digits (VERITY_PATH_MAX_INDEX_DIGITS)")


def verify_bundle(
    bundle: RunBundle,
    *,
    verifier: Model,
    composer: Model,
    run_id: str | None = None,
    settings: VeritySettings | None = None,
) -> VerifiedRun:
    """Drive the graph from execute over the bundle's stored output: parse, gatekeep, verify,
    compose or the fallback, with the same bodies and routing as a live run. A bundle has no
    tools, so an evidence retry it would earn is recorded and composed instead. Never raises
    on content."""
    run_id = run_id or uuid.uuid4().hex
    retry = bundle.retry_context
    pipeline = PipelineState(
        query=bundle.query, intent=bundle.intent, retry_context=retry,
        evidence_retry_count=retry.evidence_retry_count if retry else 0,
        unverifiable_critical=bundle.imported.unverifiable_critical if bundle.imported else [])
    plan = Plan(intent=bundle.intent, steps=[])
    state = RuntimeState(pipeline=pipeline, transcript=Transcript(query=bundle.query, plan=plan),
                         next=NextStep(node=Node.EXECUTE.value))
    run = MemoryRun(run_id=run_id, state=state, invocations=list(bundle.invocations))
    agents = Agents(planner=_NoTools(), executor=_StoredOutput(bundle.executor_output_raw),
                    verifier=verifier, composer=composer, knowledge=_NoTools(),
                    classify_intent=lambda _query: bundle.intent,
                    validate_knowledge=lambda _answer, _lookup: [])
    ctx = NodeContext(agents=agents, registry=ToolRegistry(),
                      settings=settings or VeritySettings(), evidence_retry=False)
    drive(GRAPH, ctx, run)
    result = run_result(run_id, run.state.pipeline, bundle.invocations,
                        prompts_used=run.state.prompts_used)
    return VerifiedRun(result=result, events=run.events, attempts=run.attempts)


@dataclass(frozen=True)
class _StoredOutput:
    """The Executor of a bundle: its one step is the output the run stored."""

    raw: str

    def step(self, transcript: Transcript, **_: Any) -> ExecutorStep:
        return ExecutorStep(final_output=self.raw)

    def repair(self, *_: Any, **__: Any) -> None:  # a stored output is judged as it is
        return None


class _NoTools:
    """The Planner and knowledge answerer of a bundle: never asked (the graph enters later)."""

    def plan(self, *_: Any, **__: Any) -> Plan:
        raise GraphError("a bundle is verified from its stored output; nothing is planned")

    def answer(self, *_: Any, **__: Any) -> KnowledgeAnswer:
        raise GraphError("a bundle is verified from its stored output; nothing is answered")
