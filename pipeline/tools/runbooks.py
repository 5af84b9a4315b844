"""`search_runbooks`: the best runbooks for a query, from the source's index
(`pipeline.data.runbooks`: BM25 over titles and text)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from models.invocation import QueryScope
from pipeline.data.source import DataSource
from pipeline.tools.source import ArgsModel, ToolOutput

DESCRIPTION = (
    "Search the runbooks (BM25 full-text ranking over titles and text). Returns the best "
    "documents with doc_id, title, score, the best-matching excerpt and the numbered steps."
)


class SearchRunbooksArgs(ArgsModel):
    """Arguments of search_runbooks."""

    query: str = Field(min_length=1, max_length=500, description="What to look for.")
    limit: int = Field(default=5, ge=1, le=20, description="How many documents to return.")


def search_runbooks(source: DataSource, args: SearchRunbooksArgs) -> ToolOutput:
    """Rank the runbooks for a query."""
    index = source.runbook_index()
    hits = index.search(args.query, limit=args.limit)
    documents: list[dict[str, Any]] = [
        {"doc_id": h.runbook.doc_id, "title": h.runbook.title, "score": h.score,
         "excerpt": h.excerpt, "steps": h.steps}
        for h in hits
    ]
    return ToolOutput(
        result={"documents": documents, "searched": len(index)},
        scope=QueryScope(filter=args.query), found=bool(documents),
    )
