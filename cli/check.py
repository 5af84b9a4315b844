"""`verity check-answer` and `verity import`: check another agent's answer against the tool
output it was given. The answer is split into claims (with `--provider anthropic` by the Claude
extractor, its reply laid over the answer by code), each claim is bound to the values that
carry its facts, and the usual Gatekeeper → Verifier → verdict judges them; the report marks
every claim of the answer as written. When the extractor's reply is not usable the claims are
the deterministic splitter's, and the report says so (stderr with --json)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from cli.inputs import VerifyProvider, emit_json, open_run_store, read_input, verify_models
from cli.runs import TenantOption, tenant_of
from models.check import CheckedClaim, CheckReport
from pipeline.checks import CheckedAnswer, check, imported_bundle, save
from pipeline.config import VeritySettings
from pipeline.importers.files import parse_files
from pipeline.importers.formats import parse_transcript
from pipeline.importers.record import ImportedRun
from pipeline.model import Model
from pipeline.rules.extracted import Extraction

_out = Console(soft_wrap=False)

ProviderOption = Annotated[VerifyProvider, typer.Option(
    "--provider", help="Claim extractor, Verifier and Composer: offline (deterministic, the "
    "default) or anthropic (Claude; needs ANTHROPIC_API_KEY).")]
QuestionOption = Annotated[str | None, typer.Option(
    "--question", help="The question the answer answers (else the transcript's first user "
    "message, else a generic one).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
StoreOption = Annotated[bool, typer.Option(
    "--store", help="Store the check as a run (shown by `verity show`, the page, `reverify`).")]

_MARK = {"direct_observation": ("✔", "green"), "reasonable_inference": ("~", "cyan"),
         "overstated": ("!", "yellow"), "unsupported": ("?", "yellow"),
         "external_unknown": ("?", "yellow"), "contradicted": ("✘", "red")}
_VERDICT_STYLE = {"PASS": "bold green", "LOW_CONFID": "bold yellow", "REJECT": "bold red"}


def check_answer(
    answer: Annotated[str, typer.Option("--answer", help="The answer: a Markdown or text file.")],
    evidence: Annotated[list[str], typer.Option(
        "--evidence", help="A tool output the answer rests on (repeatable): .json is read as "
        "JSON, anything else as text lines.")],
    question: QuestionOption = None,
    provider: ProviderOption = VerifyProvider.OFFLINE,
    as_json: JsonOption = False,
    store: StoreOption = False,
    tenant: TenantOption = None,
) -> None:
    """Check an answer against evidence files, claim by claim."""
    settings = VeritySettings()
    answer_text = _read(answer, settings)
    files = [(path, _read(path, settings)) for path in evidence]
    imported = parse_files((answer, answer_text), files)
    _check_and_print(imported, question=question, provider=provider, as_json=as_json,
                     store=store, tenant=tenant, settings=settings)


def import_run(
    transcript: Annotated[str, typer.Argument(help="The transcript or trace file, or - for "
                                              "stdin.")],
    format: Annotated[str, typer.Option(
        "--format", help="anthropic (Messages API messages), openai (Chat Completions "
        "messages) or otel (OTLP JSON of GenAI spans).")],
    question: QuestionOption = None,
    provider: ProviderOption = VerifyProvider.OFFLINE,
    as_json: JsonOption = False,
    store: StoreOption = False,
    bundle: Annotated[bool, typer.Option(
        "--bundle", help="Print the run bundle instead of checking it (for `verity verify`).")
    ] = False,
    tenant: TenantOption = None,
) -> None:
    """Import another agent's run and check its final answer against its tool calls."""
    settings = VeritySettings()
    imported = parse_transcript(_read(transcript, settings), format)
    if bundle:
        made, extraction = imported_bundle(imported, question=question, settings=settings,
                                           extractor=_extractor(provider, settings))
        _warn(extraction)
        emit_json(made.model_dump(mode="json"))
        return
    _check_and_print(imported, question=question, provider=provider, as_json=as_json,
                     store=store, tenant=tenant, settings=settings)


def _read(path: str, settings: VeritySettings) -> str:
    """An input file's text (or stdin's, for -), within VERITY_IMPORT_MAX_BYTES."""
    return read_input(path, max_bytes=settings.import_max_bytes, what=path,
                      setting="VERITY_IMPORT_MAX_BYTES")


def _check_and_print(imported: ImportedRun, *, question: str | None, provider: VerifyProvider,
                     as_json: bool, store: bool, tenant: str | None,
                     settings: VeritySettings) -> None:
    owner = tenant_of(tenant)
    verifier, composer = verify_models(provider, settings)
    checked = check(imported, verifier=verifier, composer=composer, question=question,
                    settings=settings, extractor=_extractor(provider, settings))
    if store:
        with open_run_store() as run_store:
            save(run_store, checked, tenant_id=owner)
    if as_json:
        _warn(checked.extraction)
        emit_json(checked.report.model_dump(mode="json"))
        return
    print_report(_out, checked.report, extraction=checked.extraction)
    if store:
        _stored_line(checked)


def _extractor(provider: VerifyProvider, settings: VeritySettings) -> Model | None:
    """The Claude claim extractor with `--provider anthropic` (a missing key is
    `verify_models`' one-line error), else None: the deterministic splitter."""
    if provider is not VerifyProvider.ANTHROPIC:
        return None
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value():
        verify_models(provider, settings)  # raises its one-line missing-key error
    from pipeline.factory import claude_extractor  # the SDK is imported only when used

    return claude_extractor(settings)


def _warn(extraction: Extraction | None) -> None:
    """A fallback to the splitter, said on stderr (stdout holds one JSON object)."""
    if extraction is not None and extraction.fallback:
        sys.stderr.write(f"verity: warning: {extraction.note}\n")


def _stored_line(checked: CheckedAnswer) -> None:
    _out.print(f"Stored. Show it again with: verity show {checked.report.run_id}", style="dim")


def print_report(console: Console, report: CheckReport, *,
                 extraction: Extraction | None = None) -> None:
    """The verdict, then how the claims were found (with an extractor), then each claim of the
    answer with its mark, then where it was found."""
    style = _VERDICT_STYLE.get(report.verdict.value if report.verdict else "", "bold")
    verdict = report.verdict.value if report.verdict else "not verified"
    console.print(f"[{style}]{verdict}[/] {escape(report.question)}")
    agent = f" by {report.agent}" if report.agent else ""
    claims = [c for c in report.claims if not c.action]
    judged = {v: sum(1 for c in claims if c.verification is not None and c.verification.value == v)
              for v in _MARK}
    counts = ", ".join(f"{n} {v.replace('_', ' ')}" for v, n in judged.items() if n)
    console.print(f"{len(claims)} claims in the {report.format} answer{agent}: {counts}",
                  style="dim")
    if extraction is not None:
        console.print(escape(extraction.note), style="yellow" if extraction.fallback else "dim")
    for claim in report.claims:
        console.print(_claim_line(claim))
        for binding in claim.bindings[:3]:
            console.print(f"      [dim]{escape(binding.tool_name)} "
                          f"{escape(binding.tool_call_id)} {escape(binding.path)}[/]")
    console.print()
    console.print(escape(report.summary))


def _claim_line(claim: CheckedClaim) -> str:
    if claim.action:
        return f"  [dim]→[/] {escape(_one_line(claim.text))} [dim](recommended action)[/]"
    mark, colour = _MARK.get(claim.verification.value if claim.verification else "", ("·", "dim"))
    label = claim.verification.value.replace("_", " ") if claim.verification else "not judged"
    critical = " [bold]critical[/]" if claim.critical else ""
    note = f" [dim]— {escape(claim.note)}[/]" if claim.note and mark != "✔" else ""
    return (f"  [{colour}]{mark}[/] {escape(_one_line(claim.text))} "
            f"[{colour}]{label}[/]{critical}{note}")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:159] + "…"
