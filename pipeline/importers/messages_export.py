"""A Verity run bundle written as an Anthropic Messages transcript (the request body
`{"model", "messages"}` that `pipeline.importers.anthropic.parse` reads back): the conversation
an agent that made the run's tool calls and stated its Executor's claims would have had.

It renders what the run observed and claimed, not Verity's own Planner/Executor conversation
(no prompts, no planning, no submit_evidence turn):

- a user message with the run's question;
- one assistant message with a `tool_use` block per invocation, in the bundle's order (id the
  invocation's `tool_call_id`, name its `tool_name`, input its `arguments`), then one user
  message with their `tool_result` blocks in the same order;
- a READY call's result is its stored projection without the reserved keys (`scope`,
  `truncated`, `total_items`: Verity's bookkeeping, not tool output) as JSON text
  (`json.dumps(..., ensure_ascii=False)`); an ERROR call's is its error text with
  `is_error: true`; a call with no stored result (still PROJECTING) is an error result saying
  so, since the Messages API wants a result for every call;
- the final assistant message: one Markdown bullet (`- `) per claim of `executor_output_raw`,
  in the Executor's order, each the claim's `text` exactly (line breaks inside one become
  spaces, or the bullet would end there); no heading, label or other word is added, and the
  Executor's hypotheses, missing information and recommended actions are left out, so the
  answer splits back into the same claims.

The model is `model` when given; otherwise the transcript names none."""

from __future__ import annotations

import json
from typing import Any

from models.bundle import RunBundle
from models.executor import ExecutorEvidenceV2
from models.invocation import LifecycleStatus, ToolInvocation
from pipeline.errors import InputError
from pipeline.rules.projection import RESERVED_KEYS

NO_RESULT = "the run recorded no result for this call"
"""The error result of a call whose result was never stored."""
FAILED = "the tool reported an error"
"""The error result of a failed call that recorded no error text."""


def anthropic_transcript(bundle: RunBundle, *, model: str | None = None) -> dict[str, Any]:
    """The Messages request body of `bundle`: question, tool calls, results, claims.
    InputError when its Executor output is not a valid one or states no claim."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": bundle.query}]}]
    if bundle.invocations:
        messages.append({"role": "assistant",
                         "content": [_tool_use(i) for i in bundle.invocations]})
        messages.append({"role": "user",
                         "content": [_tool_result(i) for i in bundle.invocations]})
    messages.append({"role": "assistant",
                     "content": [{"type": "text", "text": answer_text(bundle)}]})
    return {"model": model, "messages": messages} if model is not None else {"messages": messages}


def answer_text(bundle: RunBundle) -> str:
    """The run's claims as the final answer: one bullet per claim, in the Executor's order.
    InputError when its Executor output is not a valid one or states no claim."""
    try:
        output = ExecutorEvidenceV2.model_validate_json(bundle.executor_output_raw)
    except ValueError:
        raise InputError(f"{_run(bundle)} has no valid Executor output to write as an answer; "
                         "export it as a bundle") from None
    if not output.claims:
        raise InputError(f"{_run(bundle)} states no claim to write as an answer")
    return "\n".join(f"- {' '.join(c.text.splitlines())}" for c in output.claims)


def _run(bundle: RunBundle) -> str:
    return f"run {bundle.run_id}" if bundle.run_id else "the run"


def _tool_use(invocation: ToolInvocation) -> dict[str, Any]:
    return {"type": "tool_use", "id": invocation.tool_call_id, "name": invocation.tool_name,
            "input": invocation.arguments}


def _tool_result(invocation: ToolInvocation) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": invocation.tool_call_id}
    if invocation.status is LifecycleStatus.ERROR:
        return {**block, "content": invocation.error or FAILED, "is_error": True}
    if invocation.projection is None:
        return {**block, "content": NO_RESULT, "is_error": True}
    document = invocation.projection.model_dump(mode="json")
    result = {k: v for k, v in document.items() if k not in RESERVED_KEYS}
    return {**block, "content": json.dumps(result, ensure_ascii=False)}
