"""Versioned prompts as files, and the prompt audit built from them and a run's attempts.

Prompt text is read here and sent to models; only names, versions and hashes are persisted.
`prompt_audit(used)` is the audit a run stores: the catalog of every diagnosis role's prompt
(what the spec requires) and `used`, what the run's model attempts actually used
(`prompts_used(attempts)`: role, prompt, hash and model, sorted and unique).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from models.evaluation import PromptAudit, PromptRef, PromptUse
from models.run import LlmAttempt
from pipeline.package_data import package_files

CATALOG_VERSION = "verity.prompts.2026-12-01"
ROLES = ("planner", "executor", "verifier", "composer")
"""The catalog's roles (the spec's four)."""
PROMPT_ROLES = (*ROLES, "knowledge", "extractor")
"""Every role with a prompt file."""
_DIR = package_files("pipeline") / "prompt_files"


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
def _catalog() -> tuple[PromptRef, ...]:
    prompts = [load_prompt(role) for role in ROLES]
    return tuple(PromptRef(role=p.role, name=p.name, version=p.version, sha256=p.sha256)
                 for p in prompts)


def prompt_audit(used: Iterable[PromptUse] | None = None) -> PromptAudit:
    """The audit of a run: the catalog (every diagnosis role's prompt by name, version and
    hash) and, when given, the prompts and models its attempts used (`prompts_used`)."""
    return PromptAudit(version=CATALOG_VERSION, prompts=list(_catalog()),
                       used=None if used is None else merge_prompt_uses(used))


def prompts_used(attempts: Iterable[LlmAttempt]) -> list[PromptUse]:
    """What a run's model attempts used: one entry per (role, prompt name, version, model),
    sorted by those. Every attempt counts, failed ones too: its prompt went to that model (or
    was about to). The hash is the prompt file's when it still has that name and version."""
    return merge_prompt_uses(
        PromptUse(role=a.role, name=a.prompt_name, version=a.prompt_version,
                  sha256=_sha256_of(a.role, a.prompt_name, a.prompt_version), model=a.model)
        for a in attempts)


def merge_prompt_uses(*groups: Iterable[PromptUse]) -> list[PromptUse]:
    """The union of some lists of prompt uses, unique and sorted (a stable grouping key)."""
    unique = {(u.role, u.name, u.version, u.model): u for group in groups for u in group}
    return [unique[key] for key in sorted(unique)]


def _sha256_of(role: str, name: str, version: str) -> str | None:
    if role not in PROMPT_ROLES:
        return None
    prompt = load_prompt(role)
    return prompt.sha256 if (prompt.name, prompt.version) == (name, version) else None
