"""Checking another agent's answer: its run imported into a bundle (`pipeline.importers`),
verified like any bundle (`pipeline.verification.verify_bundle`: Gatekeeper, Verifier,
post-check, verdict rules, Composer), and reported claim by claim over the answer as written.
The CLI's `check-answer` and `import` and the HTTP API's `POST /checks` all come here."""

from __future__ import annotations

from dataclasses import dataclass

from models.bundle import FinalAnswer, RunBundle, RunResult
from models.check import CheckReport
from models.run import RunRecord
from pipeline.config import VeritySettings
from pipeline.errors import InputError
from pipeline.importers.bundle import to_bundle
from pipeline.importers.record import ImportedRun
from pipeline.importers.report import check_report
from pipeline.model import Model
from pipeline.store import RunStore
from pipeline.verification import VerifiedRun, verify_bundle


@dataclass(frozen=True)
class CheckedAnswer:
    """An imported run, checked: the bundle it became, the verified run, the report."""

    bundle: RunBundle
    run: VerifiedRun
    report: CheckReport


def check(imported: ImportedRun, *, verifier: Model, composer: Model,
          question: str | None = None, settings: VeritySettings | None = None) -> CheckedAnswer:
    """Import, verify and report. TranscriptError when the run cannot be made a bundle."""
    bundle = to_bundle(imported, question=question, settings=settings)
    run = verify_bundle(bundle, verifier=verifier, composer=composer, settings=settings)
    return CheckedAnswer(bundle=bundle, run=run, report=check_report(bundle, run.result))


def save(store: RunStore, checked: CheckedAnswer, *, tenant_id: str) -> str:
    """Store the checked answer as a run of `tenant_id` (origin `import`); its run id."""
    return store.save_verified_run(tenant_id=tenant_id, bundle=checked.bundle,
                                   result=checked.run.result, events=checked.run.events,
                                   attempts=checked.run.attempts)


def result_of(record: RunRecord) -> RunResult:
    """The stored run's result, as `verify_bundle` gave it (the run must have ended with its
    self-evaluation)."""
    if record.self_evaluation is None or record.status.value not in ("SUCCESS", "FALLBACK"):
        raise InputError(f"run {record.run_id} has no result yet ({record.status.value})")
    return RunResult(
        run_id=record.run_id, status=record.status.value, verdict=record.verdict,
        fallback_type=record.fallback_type,
        final_answer=record.final_answer or FinalAnswer(
            answer_summary="", recommended_actions=[], user_facing_answer=""),
        self_evaluation=record.self_evaluation)
