"""The transcript importers by format name: Anthropic Messages, OpenAI Chat Completions and
OTLP JSON traces with the OpenTelemetry GenAI conventions. (Plain files are read by
`files.parse_files`, from an answer and evidence files rather than one text.)"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.errors import TranscriptError
from pipeline.importers import anthropic, openai, otel
from pipeline.importers.record import Format, ImportedRun

PARSERS: dict[Format, Callable[[str], ImportedRun]] = {
    "anthropic": anthropic.parse,
    "openai": openai.parse,
    "otel": otel.parse,
}
"""The parser of each format that is one transcript text."""


def parse_transcript(text: str, format: str) -> ImportedRun:
    """The run `text` records in `format`; a TranscriptError for a format with no parser."""
    for name, parser in PARSERS.items():
        if name == format:
            return parser(text)
    known = ", ".join(PARSERS)
    raise TranscriptError(f"unknown transcript format {format[:40]!r} (known: {known})")
