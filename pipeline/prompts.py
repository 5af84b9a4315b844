"""Versioned prompts as files, and the prompt-audit catalog built from them.

Prompt text is read here and sent to models; only names, versions and hashes are persisted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from models.evaluation import PromptAudit, PromptRef

CATALOG_VERSION = "verity.prompts.2026-12-01"
ROLES = ("planner", "executor", "verifier", "composer")
_DIR = Path(__file__).with_name("prompt_files")


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt file: role, name, version, text and its sha256."""

    role: str
    name: str
    version: str
    text: str
    sha256: str


@cache
def load_prompt(role: str) -> Prompt:
    """Read `prompt_files/<role>.md`: a front-matter block with name and version, then the text."""
    raw = (_DIR / f"{role}.md").read_text(encoding="utf-8")
    _, header, text = raw.split("---\n", 2)
    fields = dict(line.split(": ", 1) for line in header.strip().splitlines())
    text = text.strip()
    return Prompt(
        role=role, name=fields["name"], version=fields["version"], text=text,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


@cache
def prompt_audit() -> PromptAudit:
    """The catalog: every role's prompt by name, version and hash."""
    prompts = [load_prompt(role) for role in ROLES]
    return PromptAudit(
        version=CATALOG_VERSION,
        prompts=[PromptRef(role=p.role, name=p.name, version=p.version, sha256=p.sha256)
                 for p in prompts],
    )
