"""An imported tool call as a Verity invocation: its result bounded into a projection that
evidence paths can address.

- text (log lines, kubectl or command output) becomes `{"lines": [...]}`, one string a line,
  so `$.lines[41]` binds the 42nd line; a text that is a JSON object or array is read as JSON;
- JSON is kept as parsed under `result` (`$.result.pods[0].status.phase`);
- the time a call looked at (its arguments' or its result's start and end, a `window` or
  `scope` object's) is the window of its scope, so a negative observation is held to it, and
  the service its result's `scope` names is its scope's when its arguments name none;
- a call the tool failed (`is_error`) or the source holds no result for ends ERROR, its text
  kept as the error; an empty result (no text, or JSON whose lists are all empty) is
  NO_EVIDENCE: a negative observation binds to its scope.

Bounded as Verity's own projections are (items per list, characters per string, bytes in all),
with `truncated` set when anything was cut."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from models.invocation import (
    EvidenceStatus,
    LifecycleStatus,
    QueryScope,
    TimeWindow,
    ToolInvocation,
)
from pipeline.importers.record import ImportedCall
from pipeline.rules.projection import bound_projection

_ERROR_CHARS = 500
_FILTER_CHARS = 300


def result_value(result: Any) -> Any:
    """A tool result as evidence: a text holding a JSON object or array is that JSON; other
    text stays text."""
    if isinstance(result, str):
        stripped = result.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                return json.loads(stripped)
            except ValueError:
                return result
    return result


def invocation_of(call: ImportedCall, *, max_items: int, max_bytes: int) -> ToolInvocation:
    """The invocation of one imported call, its result bounded into a projection."""
    scope = _scope(call.arguments)
    base = {"tool_call_id": call.call_id, "tool_name": call.tool, "arguments": call.arguments}
    if not call.answered:
        return ToolInvocation(**base, status=LifecycleStatus.ERROR,
                              evidence_status=EvidenceStatus.ERROR,
                              error="the transcript holds no result for this call")
    value = result_value(call.result)
    if call.is_error:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return ToolInvocation(**base, status=LifecycleStatus.ERROR,
                              evidence_status=EvidenceStatus.ERROR,
                              error=_one_line(text) or "the tool reported an error")
    window = _window(call.arguments) or (_window(value) if isinstance(value, dict) else None)
    if window is not None:
        scope = scope.model_copy(update={"window": window})
    if scope.service is None and isinstance(value, dict) and (service := _service(value)):
        scope = scope.model_copy(update={"service": service})
    if isinstance(value, str):
        lines = value.splitlines()
        data: dict[str, Any] = {"lines": lines}
        empty = not any(line.strip() for line in lines)
    else:
        data = {"result": value}
        empty = _found_nothing(value)
    projection = bound_projection(data, scope=scope, max_items=max_items, max_bytes=max_bytes)
    return ToolInvocation(
        **base, status=LifecycleStatus.READY, projection=projection,
        evidence_status=EvidenceStatus.NO_EVIDENCE if empty else EvidenceStatus.EVIDENCE_FOUND,
    )


_COUNT_KEYS = frozenset({"total", "count", "total_items", "matches", "hits", "firing", "found"})
"""Keys of a result that count what it found: a positive one is something found, whatever its
lists hold (a search that returned its total and no sample lines)."""


def _found_nothing(value: Any) -> bool:
    """A JSON result with nothing in it: null, empty, or an object whose lists are all empty
    and whose counts are zero (`{"deployments": [], "window": ...}`, `{"alerts": [], "firing":
    0, "scope": {"service": "payment-db"}}`: the query ran and matched nothing). An object in
    it that holds no list describes the query (its scope, its window), not what it found."""
    if value in (None, "", [], {}):
        return True
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        counted = any(k in _COUNT_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)
                      and v > 0 for k, v in value.items())
        return bool(lists) and not any(lists) and not counted and not any(
            isinstance(v, dict) and any(isinstance(x, list) for x in v.values())
            and not _found_nothing(v) for v in value.values())
    return False


def _scope(arguments: dict[str, Any]) -> QueryScope:
    """What the call looked at, as far as its arguments say: a `service` argument, and the
    arguments themselves as the filter (a negative observation is bounded by them)."""
    service = arguments.get("service")
    rendered = json.dumps(arguments, ensure_ascii=False, sort_keys=True) if arguments else None
    if rendered is not None and len(rendered) > _FILTER_CHARS:
        rendered = rendered[:_FILTER_CHARS] + "…"
    return QueryScope(service=service if isinstance(service, str) else None, filter=rendered)


def _service(value: dict[str, Any]) -> str | None:
    """The service a result says its query looked at: its `scope` object's (or `query`'s)
    `service`, when the call's arguments name none (a plain evidence file)."""
    for key in ("scope", "query"):
        inner = value.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("service"), str):
            return str(inner["service"]) or None
    return None


_WINDOW_KEYS = (("start", "end"), ("from", "to"), ("start_time", "end_time"),
                ("startsAt", "endsAt"), ("since", "until"))
"""How a query's arguments or a result name the ends of the time it looked at."""


def _window(value: dict[str, Any], depth: int = 0) -> TimeWindow | None:
    """The time window `value` names (its own ends, or those of a `window`, `time_range` or
    `scope` object in it), both ends ISO 8601 times or epoch seconds; None otherwise."""
    for first, last in _WINDOW_KEYS:
        start, end = _instant(value.get(first)), _instant(value.get(last))
        if start is not None and end is not None and start <= end:
            return TimeWindow(start=start.isoformat().replace("+00:00", "Z"),
                              end=end.isoformat().replace("+00:00", "Z"))
    if depth < 2:
        for key in ("window", "time_range", "timerange", "range", "scope"):
            inner = value.get(key)
            if isinstance(inner, dict) and (found := _window(inner, depth + 1)) is not None:
                return found
    return None


def _instant(value: Any) -> datetime | None:
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)) and 1e9 <= value < 1e10:  # epoch seconds
            return datetime.fromtimestamp(value, tz=UTC)
        if isinstance(value, str) and len(value) >= 16 and value[:4].isdigit():
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _ERROR_CHARS else line[:_ERROR_CHARS] + "…"
