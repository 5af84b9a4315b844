"""`search_logs`: counts, the most frequent message patterns and the first hits in a window.

Every pattern also carries its count in the preceding window of the same length, so a burst
(a pattern that is new or much more frequent) can be told from everyday noise. Both windows are
asked of the source (at most `LOG_FETCH_LIMIT` lines each); the totals are the source's counts,
and when a fetch stopped short of them, `truncated_fetch` says how many lines the levels and
patterns were computed over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from models.invocation import QueryScope
from pipeline.data.records import LEVEL_RANK, LEVELS, Level, LogEntry
from pipeline.data.source import LOG_FETCH_LIMIT, Fetched, LogQuery
from pipeline.tools.formatting import plural
from pipeline.tools.source import ToolOutput, WindowedArgs, minutes, time_window

if TYPE_CHECKING:
    from pipeline.data.source import DataSource

TOP_PATTERNS = 8
DESCRIPTION = (
    "Search the log lines of a service (or of all services) in a time window. Filters: minimum "
    "level (ERROR also returns FATAL; WARN also returns ERROR and FATAL) and query words that "
    "must all occur in the message (case-insensitive). Returns the total, counts by level, the "
    "most frequent message patterns (variable parts such as ids and numbers replaced) with their "
    "counts, first/last time, an example line, the count in the preceding window of equal length "
    "and a one-line summary, then the first matching lines in time order."
)


class SearchLogsArgs(WindowedArgs):
    """Arguments of search_logs."""

    service: str | None = Field(default=None, description="Service; all services if omitted.")
    query: str | None = Field(
        default=None, max_length=300, description="Words that must all occur in the message."
    )
    level: Level | None = Field(default=None, description="Minimum level: DEBUG ... FATAL.")
    limit: int = Field(default=20, ge=1, le=200, description="How many matching lines to list.")


@dataclass
class _Group:
    service: str
    level: str
    pattern: str
    example: str
    first: str
    last: str
    count: int = 0
    previous: int = 0


def search_logs(source: DataSource, args: SearchLogsArgs) -> ToolOutput:
    """Run one log search: the window and, as a second query, the preceding window."""
    start, end = args.resolve(source.now)
    span = end - start
    terms = tuple((args.query or "").lower().split())
    fetched = source.search_logs(LogQuery(start=start, end=end, service=args.service,
                                          min_level=args.level, terms=terms,
                                          limit=LOG_FETCH_LIMIT))
    before = source.search_logs(LogQuery(start=start - span, end=start, service=args.service,
                                         min_level=args.level, terms=terms,
                                         limit=LOG_FETCH_LIMIT))
    matched, previous = fetched.items, before.items
    total, previous_total = _count(fetched), _count(before)
    groups = _groups(matched, previous)
    by_level = {level: 0 for level in LEVELS}
    for entry in matched:
        by_level[entry.level] += 1
    window = time_window(start, end)
    scope = QueryScope(service=args.service, window=window, filter=_filter_text(args),
                       queries=[*fetched.queries, *before.queries] or None)
    who = args.service or "all services"
    what = plural(total, "line") + (f" at {args.level} or above" if args.level else "")
    summary = (
        f"{what} from {who} between {window.start} and {window.end} "
        f"({previous_total} in the preceding {minutes(span)} minutes)"
    )
    result: dict[str, Any] = {
        "total": total,
        "previous_window_total": previous_total,
        "by_level": {k: v for k, v in by_level.items() if v},
        "summary": summary,
        "top_messages": [_group_json(g, minutes(span)) for g in groups[:TOP_PATTERNS]],
        "hits": [_hit_json(e) for e in matched[: args.limit]],
    }
    cut = {name: _cut(one) for name, one in (("window", fetched), ("previous_window", before))}
    if any(cut.values()):
        # Levels and patterns are over the lines fetched; the totals are the backend's.
        result["truncated_fetch"] = {name: value for name, value in cut.items() if value}
        result["summary"] += "; levels and patterns over the first " + " and ".join(
            f"{value['fetched']} lines of the {name.replace('_', ' ')}"
            for name, value in cut.items() if value)
    return ToolOutput(result=result, scope=scope, found=total > 0 or bool(matched))


def _count(fetched: Fetched[LogEntry]) -> int:
    """The backend's count when it knows it, else the lines fetched."""
    return fetched.total if fetched.total is not None else len(fetched.items)


def _cut(fetched: Fetched[LogEntry]) -> dict[str, int | None] | None:
    """`{fetched, total}` when the fetch stopped short of every match (total None: the backend
    could not count, and the fetch stopped at its limit)."""
    if fetched.truncated or (fetched.total is None and len(fetched.items) >= LOG_FETCH_LIMIT):
        return {"fetched": len(fetched.items), "total": fetched.total}
    return None


def _groups(matched: Sequence[LogEntry], previous: Sequence[LogEntry]) -> list[_Group]:
    groups: dict[tuple[str, str, str], _Group] = {}
    for entry in matched:
        key = (entry.service, entry.level, entry.pattern)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(entry.service, entry.level, entry.pattern,
                                         entry.message, entry.ts, entry.ts)
        group.count += 1
        group.last = entry.ts
    for entry in previous:
        group = groups.get((entry.service, entry.level, entry.pattern))
        if group is not None:
            group.previous += 1
    return sorted(groups.values(), key=lambda g: (-g.count, -LEVEL_RANK[g.level], g.first))


def _group_json(group: _Group, span_minutes: int) -> dict[str, Any]:
    summary = (
        f"{plural(group.count, group.level + ' line')} from {group.service} between "
        f"{group.first} and {group.last} ({group.previous} in the preceding {span_minutes} "
        f"minutes): {group.example}"
    )
    return {
        "service": group.service, "level": group.level, "pattern": group.pattern,
        "example": group.example, "count": group.count, "previous_count": group.previous,
        "first_ts": group.first, "last_ts": group.last, "summary": summary,
    }


def _hit_json(entry: LogEntry) -> dict[str, Any]:
    hit: dict[str, Any] = {"ts": entry.ts, "service": entry.service, "level": entry.level,
                           "message": entry.message}
    if entry.pod:
        hit["pod"] = entry.pod
    if entry.trace_id:
        hit["trace_id"] = entry.trace_id
    return hit


def _filter_text(args: SearchLogsArgs) -> str | None:
    parts = []
    if args.level:
        parts.append(f"level >= {args.level}")
    if args.query:
        parts.append(f'message contains "{args.query}"')
    return " AND ".join(parts) or None
