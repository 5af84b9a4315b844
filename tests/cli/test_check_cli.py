"""`verity check-answer` and `verity import` as a user runs them: a real process, real exit
codes, one JSON object with `--json`, one line on stderr for input that cannot be used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_verity

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "bench" / "data" / "answers" / "checkout-pool-bullets"
TRANSCRIPTS = ROOT / "tests" / "importers" / "data"


def _case_args() -> list[str]:
    evidence = sorted((CASE / "evidence").iterdir())
    return ["--answer", str(CASE / "answer.md"),
            *[arg for path in evidence for arg in ("--evidence", str(path))]]


def test_check_answer__json_marks_every_claim_of_the_answer(env: dict[str, str]) -> None:
    done = run_verity("check-answer", *_case_args(), "--question",
                      "Why is checkout-service returning 500s?", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    assert report["verdict"] in ("PASS", "LOW_CONFID", "REJECT")
    answer = (CASE / "answer.md").read_text(encoding="utf-8")
    assert report["answer"] == answer
    labels = json.loads((CASE / "labels.json").read_text(encoding="utf-8"))["claims"]
    claims = report["claims"]
    assert len(claims) >= len(labels) - 2
    for claim in claims:
        start, end = claim["span"]
        assert answer[start:end] == claim["text"]
        assert set(claim) >= {"text", "span", "verification", "bindings"}
        for binding in claim["bindings"]:
            assert binding["tool_name"] in {p.name for p in (CASE / "evidence").iterdir()}
    by_text = {c["text"]: c for c in claims}
    # a count the answer got wrong is caught where the count stands
    wrong = [c for c in labels if c["label"] == "contradicted"]
    caught = [by_text[c["text"]]["verification"] for c in wrong if c["text"] in by_text]
    assert "contradicted" in caught


def test_check_answer__human_output_and_store_then_show(env: dict[str, str]) -> None:
    done = run_verity("check-answer", *_case_args(), "--store", env=env)
    assert done.returncode == 0, done.stderr
    assert "claims in the files answer" in done.stdout
    run_id = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)[-1]
    shown = run_verity("show", run_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["source"] == "import"
    assert record["imported"]["answer"] == (CASE / "answer.md").read_text(encoding="utf-8")
    exported = run_verity("export", run_id, env=env)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["imported"] == record["imported"]
    events = run_verity("export", run_id, "--format", "otel", env=env)
    assert events.returncode == 0, events.stderr
    records = json.loads(events.stdout)["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert {r["eventName"] for r in records} == {"gen_ai.evaluation.result"}
    labels = [a["value"]["stringValue"] for r in records for a in r["attributes"]
              if a["key"] == "gen_ai.evaluation.score.label"]
    assert labels[0] == record["verdict"] and "contradicted" in labels[1:]


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "otel"])
def test_import__each_format_checks_its_final_answer(env: dict[str, str], fmt: str) -> None:
    suffix = "jsonl" if fmt == "otel" else "json"
    done = run_verity("import", str(TRANSCRIPTS / f"{fmt}_checkout_500s.{suffix}"),
                      "--format", fmt, "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == fmt
    assert report["question"].startswith("Why is checkout-service returning 500s")
    assert report["claims"] and all(c["span"][1] > c["span"][0] for c in report["claims"])
    ids = {b["tool_call_id"] for c in report["claims"] for b in c["bindings"]}
    assert ids and all(i.startswith(("toolu_", "call_")) for i in ids)  # the source's own ids


def test_import__bundle_is_what_verify_accepts(env: dict[str, str]) -> None:
    made = run_verity("import", str(TRANSCRIPTS / "anthropic_checkout_500s.json"), "--format",
                      "anthropic", "--bundle", env=env)
    assert made.returncode == 0, made.stderr
    bundle = json.loads(made.stdout)
    assert bundle["imported"]["format"] == "anthropic"
    verified = run_verity("verify", "-", "--json", env=env, stdin=made.stdout)
    assert verified.returncode == 0, verified.stderr
    checked = run_verity("import", str(TRANSCRIPTS / "anthropic_checkout_500s.json"), "--format",
                         "anthropic", "--json", env=env)
    assert json.loads(verified.stdout)["verdict"] == json.loads(checked.stdout)["verdict"]


@pytest.mark.parametrize(("args", "message"), [
    (["import", "tests/importers/data/anthropic_duplicate_id.json", "--format", "anthropic"],
     "duplicate tool_use id 'toolu_01A7kPodsQw3XbV9cN2mZ'"),
    (["import", "tests/importers/data/anthropic_not_json.json", "--format", "anthropic"],
     "not JSON"),
    (["import", "tests/importers/data/openai_checkout_500s.json", "--format", "gemini"],
     "gemini"),
    (["import", "no-such-file.json", "--format", "openai"], "no such file: no-such-file.json"),
    (["check-answer", "--answer", "no-such.md", "--evidence", "x.json"],
     "no such file: no-such.md"),
])
def test_bad_input__one_line_exit_2(env: dict[str, str], args: list[str], message: str) -> None:
    done = run_verity(*args, env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verity: error: ") and message in lines[0]
    assert "Traceback" not in done.stderr


def test_check_answer__bad_evidence_and_empty_answer(env: dict[str, str], tmp_path: Path) -> None:
    answer, evidence = tmp_path / "answer.md", tmp_path / "pods.json"
    answer.write_text("payment-db logged 512 errors at 14:03.\n", encoding="utf-8")
    evidence.write_text('{"pods": [', encoding="utf-8")
    done = run_verity("check-answer", "--answer", str(answer), "--evidence", str(evidence), env=env)
    assert done.returncode == 2 and "pods.json" in done.stderr and "not JSON" in done.stderr
    evidence.write_text('{"errors": 512}', encoding="utf-8")
    answer.write_text("## Summary\n\nWhat happened?\n", encoding="utf-8")
    done = run_verity("check-answer", "--answer", str(answer), "--evidence", str(evidence), env=env)
    assert done.returncode == 2
    assert done.stderr.strip() == ("verity: error: the answer states nothing to check (no "
                                   "sentence, list item or table row with a fact)")
    assert not (tmp_path / "home").exists()  # nothing stored, nothing half-written


def test_export_otel__only_a_check_has_evaluation_events(env: dict[str, str]) -> None:
    stored = run_verity("verify", "samples/bundles/pass.json", "--store", "--json", env=env)
    assert stored.returncode == 0, stored.stderr
    run_id = json.loads(stored.stdout)["run_id"]
    done = run_verity("export", run_id, "--format", "otel", env=env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"verity: error: run {run_id} is not a check of another "
                                   "agent's answer: --format otel exports the verdicts of one")
