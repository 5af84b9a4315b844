"""The offline knowledge answerer and the check every knowledge answer must pass.

A KNOWLEDGE_QUERY is answered from the single `search_runbooks` call: the best document's
steps (or its excerpt), then pointers to close runners-up, every item citing returned doc ids.
`validate_knowledge_answer` is pure and applies to any answerer's output, model or offline.
"""

from __future__ import annotations

from typing import Any

from models.agent import AnswerItem, KnowledgeAnswer
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from models.tool_names import SEARCH_RUNBOOKS

MAX_STEPS = 8
RUNNER_UP_RATIO = 0.6
"""A runner-up is mentioned when it scores at least this fraction of the best document."""
MAX_RUNNERS_UP = 2
MODEL_NAME = "offline-knowledge-1"


def returned_documents(invocation: ToolInvocation) -> list[dict[str, Any]]:
    """The documents in the lookup's stored projection (empty without one)."""
    if invocation.projection is None:
        return []
    documents = invocation.projection.model_dump(mode="json").get("documents")
    if not isinstance(documents, list):
        return []
    return [d for d in documents if isinstance(d, dict) and isinstance(d.get("doc_id"), str)]


class OfflineKnowledgeAnswerer:
    """Answers from the returned runbooks only."""

    model = MODEL_NAME

    def answer(
        self, query: str, lookup: ToolInvocation, *, log: object | None = None
    ) -> KnowledgeAnswer:
        """Items from the best document's steps, plus close runners-up; empty when none."""
        documents = returned_documents(lookup) if lookup.status is LifecycleStatus.READY else []
        items: list[AnswerItem] = []
        if documents:
            best = documents[0]
            doc_id, title = best["doc_id"], str(best.get("title", best["doc_id"]))
            steps = [s for s in best.get("steps") or [] if isinstance(s, str) and s.strip()]
            items.append(AnswerItem(text=f"Runbook \"{title}\" ({doc_id}) answers this.",
                                    document_ids=[doc_id]))
            if steps:
                items += [AnswerItem(text=f"Step {n}: {step}", document_ids=[doc_id])
                          for n, step in enumerate(steps[:MAX_STEPS], start=1)]
            elif best.get("excerpt"):
                items.append(AnswerItem(text=str(best["excerpt"]), document_ids=[doc_id]))
            items += _runners_up(documents)
        return KnowledgeAnswer(lookup_tool_call_id=lookup.tool_call_id, items=items)


def _runners_up(documents: list[dict[str, Any]]) -> list[AnswerItem]:
    top = float(documents[0].get("score") or 0.0)
    close = [d for d in documents[1:] if top > 0 and float(d.get("score") or 0.0)
             >= RUNNER_UP_RATIO * top][:MAX_RUNNERS_UP]
    return [AnswerItem(text=f"See also \"{d.get('title', d['doc_id'])}\" ({d['doc_id']}).",
                       document_ids=[d["doc_id"]]) for d in close]


def validate_knowledge_answer(answer: KnowledgeAnswer, invocation: ToolInvocation) -> list[str]:
    """Why the answer may not be published (empty when it may): it must cite the single
    lookup, have items, and cite only documents that lookup returned."""
    errors: list[str] = []
    if invocation.tool_name != SEARCH_RUNBOOKS:
        errors.append(f"the lookup is {invocation.tool_name!r}, not {SEARCH_RUNBOOKS!r}")
    if (invocation.status is not LifecycleStatus.READY
            or invocation.evidence_status is not EvidenceStatus.EVIDENCE_FOUND):
        errors.append(f"the lookup {invocation.tool_call_id} returned no documents "
                      f"({invocation.status}, {invocation.evidence_status})")
    if answer.lookup_tool_call_id != invocation.tool_call_id:
        errors.append(f"the answer cites lookup {answer.lookup_tool_call_id!r}, not "
                      f"{invocation.tool_call_id!r}")
    if not answer.items:
        errors.append("the answer has no items")
    returned = {d["doc_id"] for d in returned_documents(invocation)}
    for index, item in enumerate(answer.items):
        unknown = [doc_id for doc_id in item.document_ids if doc_id not in returned]
        if unknown:
            errors.append(f"item {index} cites documents the lookup did not return: "
                          f"{', '.join(unknown)}")
    return errors
