"""A Claude reply is one call of its answer tool and nothing else (issue 19): text beside the
tool, a second call or another tool make it invalid output, which takes the technical retry."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.agents.claude import answer_text
from pipeline.providers.messages import MessagesResponse

ANSWER = {"type": "tool_use", "id": "toolu_1", "name": "submit_answer", "input": {"a": 1}}


def _response(*content: dict[str, Any]) -> MessagesResponse:
    return MessagesResponse(content=list(content), stop_reason="tool_use")


def test_answer_text__one_call_is_the_answer() -> None:
    assert answer_text(_response(ANSWER), "submit_answer") == '{"a": 1}'
    # an empty text block or a thinking block is not text beside the tool
    assert answer_text(_response({"type": "thinking", "thinking": "hm"},
                                 {"type": "text", "text": "  "}, ANSWER),
                       "submit_answer") == '{"a": 1}'


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "text", "text": "The root cause is DNS."}, ANSWER],
        [ANSWER, {"type": "text", "text": "Also, redis is degraded."}],
        [ANSWER, {**ANSWER, "id": "toolu_2"}],
        [ANSWER, {**ANSWER, "id": "toolu_3", "name": "search_logs"}],
        [{"type": "text", "text": '{"a": 1}'}],
        [],
    ],
    ids=["text-before", "text-after", "called-twice", "another-tool", "json-as-text", "empty"],
)
def test_answer_text__anything_else_is_invalid_output(content: list[dict[str, Any]]) -> None:
    assert answer_text(_response(*content), "submit_answer") == ""
