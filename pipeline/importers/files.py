"""Reads a run kept as plain files into an `ImportedRun`: an answer file (prose) and evidence
files, each one call whose result is the file (JSON for `.json` files, RFC 8259; text as
written for any other). The caller reads the files; this module only sees names and texts."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.importers.jsontext import fail, load, quote
from pipeline.importers.record import ImportedCall, ImportedRun

_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")
_ID_CHARS = 128


def parse_files(answer: tuple[str, str], evidence: Sequence[tuple[str, str]]) -> ImportedRun:
    """The run of an answer file and evidence files, given as (file name, text) pairs: one call
    per evidence file in the order given, named after the file."""
    answer_name, text = answer  # kept as written: claim spans are offsets into the file
    if not text.strip():
        fail(f"answer {_shown(base_name(answer_name))}", "empty")
    calls = []
    taken: set[str] = set()
    for name, content in evidence:
        base = base_name(name)
        if not base:
            fail(f"evidence {quote(name)}", "no file name")
        call_id = _unique(_NOT_ID.sub("-", base)[:_ID_CHARS], taken)
        taken.add(call_id)
        result = load(content, f"evidence {_shown(base)}") if _is_json(base) else content
        calls.append(ImportedCall(call_id=call_id, tool=base, arguments={"file": base},
                                  result=result))
    return ImportedRun(format="files", answer=text, calls=tuple(calls))


def base_name(name: str) -> str:
    """The file name without its folders (either slash separates them); "" for a folder."""
    return name.replace("\\", "/").rpartition("/")[2]


def _unique(call_id: str, taken: set[str]) -> str:
    """`call_id`, or with `-2`, `-3`… when an earlier file took it."""
    candidate, number = call_id, 1
    while candidate in taken:
        number += 1
        suffix = f"-{number}"
        candidate = call_id[: _ID_CHARS - len(suffix)] + suffix
    return candidate


def _is_json(name: str) -> bool:
    return name.lower().endswith(".json")


def _shown(name: str) -> str:
    return name if name.isprintable() else repr(name)
