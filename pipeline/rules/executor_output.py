"""Parsing the Executor's raw output: a legal contract envelope, or INVALID_OUTPUT.

The parser only decides whether the text is a structured Executor output at all: exactly one
JSON object with a `claims` array of objects. Everything finer (removed fields, missing
bindings, duplicate ids, field types) is the Gatekeeper's `schema.executor_v2` rule, so that it
is audited per rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ParseFailure(StrEnum):
    """Why the raw output is not a structured Executor output."""

    NOT_JSON = "not_json"
    NOT_AN_OBJECT = "not_an_object"
    DUPLICATE_KEY = "duplicate_key"
    MISSING_CLAIMS = "missing_claims"
    CLAIMS_NOT_OBJECTS = "claims_not_objects"


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """The outcome of parsing: a document, or the reason there is none."""

    document: dict[str, Any] | None
    failure: ParseFailure | None = None

    @property
    def ok(self) -> bool:
        """True when the output is a legal structured envelope."""
        return self.failure is None


class _DuplicateKeyError(ValueError):
    pass


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def parse_executor_output(raw: str) -> ParsedOutput:
    """Parse raw Executor text; never raises."""
    try:
        document = json.loads(raw, object_pairs_hook=_reject_duplicates)
    except _DuplicateKeyError:
        return ParsedOutput(None, ParseFailure.DUPLICATE_KEY)
    except (ValueError, RecursionError):
        return ParsedOutput(None, ParseFailure.NOT_JSON)
    if not isinstance(document, dict):
        return ParsedOutput(None, ParseFailure.NOT_AN_OBJECT)
    claims = document.get("claims")
    if not isinstance(claims, list):
        return ParsedOutput(None, ParseFailure.MISSING_CLAIMS)
    if not all(isinstance(claim, dict) for claim in claims):
        return ParsedOutput(None, ParseFailure.CLAIMS_NOT_OBJECTS)
    return ParsedOutput(document)
