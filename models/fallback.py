"""The safe fallback: fixed types, deterministic text, no unvalidated draft content."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from models.common import Contract, FallbackType


class FallbackReason(StrEnum):
    """Fixed reason codes; never an internal error string."""

    EXECUTOR_INVALID_OUTPUT = "EXECUTOR_INVALID_OUTPUT"
    GATEKEEPER_REJECT = "GATEKEEPER_REJECT"
    STRUCTURAL_REPAIR_FAILED = "STRUCTURAL_REPAIR_FAILED"
    VERIFIER_REJECT = "VERIFIER_REJECT"
    VERIFIER_UNAVAILABLE = "VERIFIER_UNAVAILABLE"
    COMPOSER_UNAVAILABLE = "COMPOSER_UNAVAILABLE"
    KNOWLEDGE_REFERENCE_INVALID = "KNOWLEDGE_REFERENCE_INVALID"
    """A knowledge answer cites no document, or one the lookup did not return (or the lookup
    returned none)."""
    KNOWLEDGE_UNAVAILABLE = "KNOWLEDGE_UNAVAILABLE"
    """The knowledge model could not answer: provider down, invalid output after retries."""
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    PLANNER_UNAVAILABLE = "PLANNER_UNAVAILABLE"
    EXECUTOR_UNAVAILABLE = "EXECUTOR_UNAVAILABLE"


class VerifiedSource(Contract):
    """A source the fallback answer rests on."""

    claim_id: str = Field(description="Allowed claim id.")
    invocation_id: str = Field(description="Source tool_call_id.")
    tool_name: str = Field(description="Source tool.")
    path: str = Field(description="Path in the projection.")


class SafeFallback(Contract):
    """A deterministic answer for every failure path."""

    fallback_type: FallbackType = Field(description="One of the three fixed types.")
    reason: FallbackReason = Field(description="Fixed reason code.")
    answer_summary: str = Field(description="Deterministic summary.")
    recommended_actions: list[str] = Field(description="Deterministic or allowed actions.")
    user_facing_answer: str = Field(description="Deterministic answer text.")
    verified_sources: list[VerifiedSource] = Field(description="Empty unless claims survived.")
