"""One claim of an imported answer as `verity check-answer` judges it (plain files) over a
Verifier that calls every claim a direct observation (`bench/checks.py`'s `Credulous`): what the
deterministic rules alone make of it. Shared by the tests of those rules."""

from __future__ import annotations

from bench.checks import Credulous
from models.check import CheckedClaim
from pipeline.agents.template_composer import TemplateComposer
from pipeline.checks import check
from pipeline.importers.files import parse_files


def judged(answer: str, *evidence: tuple[str, str]) -> CheckedClaim:
    """The one claim (not an action) of `answer`, checked against the evidence files given as
    (file name, text) pairs."""
    report = check(parse_files(("answer.md", answer), list(evidence)), verifier=Credulous(),
                   composer=TemplateComposer()).report
    (claim,) = [c for c in report.claims if not c.action]
    return claim
