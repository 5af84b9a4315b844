"""Checking another agent's answer: its run imported into a bundle (`pipeline.importers`),
verified like any bundle (`pipeline.verification.verify_bundle`: Gatekeeper, Verifier,
post-check, verdict rules, Composer), and reported claim by claim over the answer as written.
The CLI's `check-answer` and `import` and the HTTP API's `POST /checks` all come here.

The answer's claims are the deterministic splitter's (`pipeline.rules.prose`), or, given an
extractor model, the ones it names laid over the answer by code (`pipeline.rules.extracted`),
the splitter's again when no reply of it is usable. A check with an extractor keeps its
attempts with the run's, its prompt in the prompt audit, and how the claims were found in the
rule channel (`rule_evaluation["claim_extraction"]`); `CheckedAnswer.extraction` carries the
same for the caller to say (a fallback: the CLI's warning, the client's log)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from models.bundle import FinalAnswer, RunBundle, RunResult
from models.check import CheckReport
from models.evaluation import PromptUse
from models.run import LlmAttempt, RunRecord
from pipeline.config import VeritySettings
from pipeline.errors import (
    AttemptsExhaustedError,
    InputError,
    ProviderOutputInvalidError,
    RunCancelledError,
    RunFailure,
)
from pipeline.importers.bundle import to_bundle
from pipeline.importers.record import ImportedRun
from pipeline.importers.report import check_report
from pipeline.model import Model
from pipeline.prompts import load_prompt, merge_prompt_uses
from pipeline.rules.extracted import Extraction, claims_from_reply, fallback
from pipeline.rules.prose import ProseClaim
from pipeline.run.attempts import AttemptLog, call_with_retry
from pipeline.store import RunStore
from pipeline.verification import VerifiedRun, verify_bundle

EXTRACTOR_ROLE = "extractor"


@dataclass(frozen=True)
class CheckedAnswer:
    """An imported run, checked: the bundle it became, the verified run, the report, and how
    an extractor found the claims (None: the splitter did, no extractor was asked)."""

    bundle: RunBundle
    run: VerifiedRun
    report: CheckReport
    extraction: Extraction | None = None


def check(imported: ImportedRun, *, verifier: Model, composer: Model,
          question: str | None = None, settings: VeritySettings | None = None,
          extractor: Model | None = None) -> CheckedAnswer:
    """Import, verify and report; the claims are `extractor`'s when one is given.
    TranscriptError when the run cannot be made a bundle."""
    run_id = uuid.uuid4().hex
    log = AttemptLog(run_id)
    bundle, extraction = imported_bundle(imported, question=question, settings=settings,
                                         extractor=extractor, log=log)
    run = verify_bundle(bundle, verifier=verifier, composer=composer, run_id=run_id,
                        settings=settings)
    if extraction is not None:
        run = _with_extraction(run, extraction, log.attempts)
    return CheckedAnswer(bundle=bundle, run=run, report=check_report(bundle, run.result),
                         extraction=extraction)


def imported_bundle(imported: ImportedRun, *, question: str | None = None,
                    settings: VeritySettings | None = None, extractor: Model | None = None,
                    log: AttemptLog | None = None) -> tuple[RunBundle, Extraction | None]:
    """The bundle of `imported` (`to_bundle`), its claims `extractor`'s when one is given (its
    attempts recorded in `log`), and that extraction (None without an extractor)."""
    extraction = None if extractor is None else extract_claims(
        imported.answer, extractor, log=log or AttemptLog(uuid.uuid4().hex))
    bundle = to_bundle(imported, question=question, settings=settings,
                       extract=None if extraction is None else _given(extraction))
    return bundle, extraction


def extract_claims(answer: str, extractor: Model, *, log: AttemptLog) -> Extraction:
    """The claims of `answer` as `extractor` names them (`claims_from_reply`), its call under
    the retry rules (an unusable reply takes the technical retry) and recorded in `log`; the
    splitter's, flagged, when no reply is usable or the model cannot answer. A cancelled call
    and a ConfigurationError (missing or rejected key) propagate."""
    def parse(text: str) -> Extraction:
        extraction = claims_from_reply(answer, text)
        if extraction.fallback:
            raise ProviderOutputInvalidError(
                extraction.reason or "the extractor's reply is not usable")
        return extraction

    try:
        extraction = call_with_retry(extractor, role=EXTRACTOR_ROLE,
                                     payload=answer.encode("utf-8"), parse=parse, log=log)
    except RunCancelledError:
        raise
    except RunFailure as exc:
        last = exc.__cause__ if isinstance(exc, AttemptsExhaustedError) else exc
        reason = (_one_line(last) if isinstance(last, ProviderOutputInvalidError)
                  else f"the extractor did not answer ({_one_line(last or exc)})")
        extraction = fallback(answer, reason)
    return extraction


def _given(extraction: Extraction) -> Callable[[str], list[ProseClaim]]:
    return lambda _answer: extraction.claims


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _with_extraction(run: VerifiedRun, extraction: Extraction,
                     attempts: list[LlmAttempt]) -> VerifiedRun:
    """`run` with the extractor's attempts before its own, their prompt in its prompt audit
    and the extraction's counts in its rule channel."""
    prompt = load_prompt(EXTRACTOR_ROLE)
    uses = [PromptUse(role=a.role, name=a.prompt_name, version=a.prompt_version,
                      sha256=prompt.sha256 if (a.prompt_name, a.prompt_version)
                      == (prompt.name, prompt.version) else None, model=a.model)
            for a in attempts]
    evaluation = run.result.self_evaluation
    verifier = evaluation.verifier_evaluation
    audit = verifier.prompt_audit
    audit = audit.model_copy(update={"used": merge_prompt_uses(audit.used or [], uses)})
    rules = {**evaluation.rule_evaluation, "claim_extraction": {
        "model": attempts[-1].model if attempts else None, **extraction.audit()}}
    evaluation = evaluation.model_copy(update={
        "rule_evaluation": rules,
        "verifier_evaluation": verifier.model_copy(update={"prompt_audit": audit})})
    result = run.result.model_copy(update={"self_evaluation": evaluation})
    return VerifiedRun(result=result, events=run.events, attempts=[*attempts, *run.attempts])


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
