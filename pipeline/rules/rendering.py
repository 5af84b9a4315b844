"""Deterministic answer text from Composer input, worded by verdict as composer.md requires.

Used by the offline template Composer and by the fallbacks, so every deterministic answer reads
the same way. It adds no fact: every service, number or id in its output comes from its input.
"""

from __future__ import annotations

from models.composer import ComposerInput, ComposerOutput
from pipeline.rules.statements import (
    DEFAULT_ACTION,
    NO_RELIABLE_CONCLUSION,
    assemble,
    check_reply,
    self_statements,
)

__all__ = ["DEFAULT_ACTION", "NO_RELIABLE_CONCLUSION", "render"]


def render(composer_input: ComposerInput) -> ComposerOutput:
    """The verdict-specific answer for this input: the input restated statement by statement
    (`statements.self_statements`), checked and assembled as a model's answer would be."""
    reply = self_statements(composer_input)
    return assemble(composer_input, check_reply(reply, composer_input))
