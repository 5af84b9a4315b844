"""Check the hand-labelled answer set and print its counts.

    .venv/bin/python bench/data/answers/check_labels.py [DIR]

DIR defaults to the folder of this script. Every sub-folder with a labels.json is a case:

- labels.json has a question, a style (bullets, prose, sections, table, mixed) and claims;
- every claim has a text, a label (supported, contradicted, unsupported), a why and an evidence
  list;
- every claim text occurs exactly once in answer.md, and no two claims overlap there;
- evidence/ holds at least one file, each .json (parsed as JSON), .txt or .log;
- every evidence place is {"file", "at"}: the file is in the case's evidence/, and `at` is a
  singular JSONPath that resolves in that file's JSON (`$`, `.name`, `["name"]`, `[3]`, written
  the canonical way) or `line N` within a .txt/.log file;
- unsupported claims have no places; supported and contradicted claims have at least one,
  except a supported claim whose why says that no single value states it (NO_PLACE_NOTE).

Prints the counts per label, per style, in total and of the evidence places as JSON; exits 1
(after listing the problems on stderr) when a check fails. Standard library only, and the
repository's `pipeline.rules.jsonpath` (itself standard library only) to parse, resolve and
spell the paths as the checker does (bench/checks.py reads the places with it too).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.rules.jsonpath import PathError, format_path, parse_path, resolve  # noqa: E402

LABELS = ("supported", "contradicted", "unsupported")
STYLES = ("bullets", "prose", "sections", "table", "mixed")
EVIDENCE_SUFFIXES = (".json", ".txt", ".log")
CLAIM_KEYS = {"text", "label", "why", "evidence"}
PLACE_KEYS = {"file", "at"}
NO_PLACE_NOTE = "no single value states it"
"""Words in the why of a supported claim left without evidence places on purpose."""

_LINE = re.compile(r"line ([1-9][0-9]*)")


# --- one case -------------------------------------------------------------------------------------

def occurrences(haystack: str, needle: str) -> list[int]:
    """Start offsets of every occurrence of needle, overlapping ones included."""
    found, start = [], 0
    while True:
        at = haystack.find(needle, start)
        if at < 0:
            return found
        found.append(at)
        start = at + 1


def load_case(folder: Path, problems: list[str]) -> tuple[dict, str] | None:
    name = folder.name
    try:
        labels = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"{name}: labels.json: {exc}")
        return None
    try:
        answer = (folder / "answer.md").read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(f"{name}: answer.md: {exc}")
        return None
    if not isinstance(labels, dict):
        problems.append(f"{name}: labels.json is not an object")
        return None
    return labels, answer


def check_header(name: str, labels: dict, problems: list[str]) -> list:
    """Check question, style and keys; return the claims (a list, maybe empty)."""
    if set(labels) != {"question", "style", "claims"}:
        problems.append(f"{name}: labels.json keys are {sorted(labels)}, "
                        "expected question, style, claims")
    question = labels.get("question")
    if not isinstance(question, str) or not question.strip():
        problems.append(f"{name}: question is missing or empty")
    if labels.get("style") not in STYLES:
        problems.append(f"{name}: style {labels.get('style')!r} is not one of "
                        f"{', '.join(STYLES)}")
    claims = labels.get("claims")
    if not isinstance(claims, list) or not claims:
        problems.append(f"{name}: claims is missing or empty")
        return []
    return claims


def check_text(where: str, claim: dict, answer: str, problems: list[str]) -> int | None:
    """Check label, why and text of one claim; return the text's offset in the answer."""
    text, label, why = claim["text"], claim["label"], claim["why"]
    if label not in LABELS:
        problems.append(f"{where}: label {label!r} is not one of {', '.join(LABELS)}")
    if not isinstance(why, str) or not why.strip():
        problems.append(f"{where}: why is empty")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: text is empty")
        return None
    if text != text.strip() or "\n" in text:
        problems.append(f"{where}: text has surrounding blanks or a line break: {text!r}")
    hits = occurrences(answer, text)
    if len(hits) != 1:
        problems.append(f"{where}: text occurs {len(hits)} times in answer.md: {text!r}")
        return None
    return hits[0]


def check_overlaps(name: str, spans: list[tuple[int, int, int]], problems: list[str]) -> None:
    spans.sort()
    for (_, e1, n1), (s2, _, n2) in zip(spans, spans[1:], strict=False):
        if s2 < e1:
            problems.append(f"{name}: claims {n1} and {n2} overlap in answer.md")


def load_evidence(folder: Path, problems: list[str]) -> dict[str, Any]:
    """Each evidence file by name: its JSON, or its lines for .txt/.log (None if unusable)."""
    name = folder.name
    evidence = folder / "evidence"
    files = sorted(p for p in evidence.iterdir() if p.is_file()) if evidence.is_dir() else []
    if not files:
        problems.append(f"{name}: evidence/ is missing or empty")
    loaded: dict[str, Any] = {}
    for path in files:
        loaded[path.name] = None
        if path.suffix not in EVIDENCE_SUFFIXES:
            problems.append(f"{name}: evidence/{path.name}: not .json, .txt or .log")
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix != ".json":
            loaded[path.name] = text.splitlines()
            continue
        try:
            loaded[path.name] = json.loads(text)
        except ValueError as exc:
            problems.append(f"{name}: evidence/{path.name}: invalid JSON: {exc}")
    return loaded


def check_place(where: str, place: Any, files: dict[str, Any], problems: list[str]) -> None:
    if not isinstance(place, dict) or set(place) != PLACE_KEYS:
        problems.append(f"{where}: a place must be {{\"file\", \"at\"}}: {place!r}")
        return
    file, at = place["file"], place["at"]
    if file not in files:
        problems.append(f"{where}: {file!r} is not in evidence/")
        return
    content = files[file]
    if content is None or not isinstance(at, str):
        problems.append(f"{where}: {file}: cannot check {at!r}")
    elif file.endswith(".json"):
        check_json_place(where, file, content, at, problems)
    else:
        check_line_place(where, file, content, at, problems)


def check_json_place(where: str, file: str, document: Any, at: str,
                     problems: list[str]) -> None:
    """`at` is a singular JSONPath (pipeline.rules.jsonpath) that resolves in `document`,
    counts its indexes from the start, and is spelled as `format_path` spells it."""
    try:
        segments = parse_path(at)
        negative = [s for s in segments if isinstance(s, int) and s < 0]
        if negative:
            raise PathError(f"index {negative[0]} counts from the end: count from the start")
        resolve(document, at)
    except PathError as exc:
        problems.append(f"{where}: {file} {at}: {exc}")
        return
    canonical = format_path(segments)
    if canonical != at:
        problems.append(f"{where}: {file} {at}: write it {canonical}")


def check_line_place(where: str, file: str, lines: list[str], at: str,
                     problems: list[str]) -> None:
    match = _LINE.fullmatch(at)
    if match is None:
        problems.append(f"{where}: {file} {at!r}: expected 'line N'")
    elif int(match.group(1)) > len(lines):
        problems.append(f"{where}: {file} {at}: the file has {len(lines)} lines")
    elif not lines[int(match.group(1)) - 1].strip():
        problems.append(f"{where}: {file} {at}: the line is blank")


def check_evidence(where: str, claim: dict, files: dict[str, Any],
                   problems: list[str]) -> tuple[int, bool]:
    """Check a claim's evidence list; return its number of places and whether it is a
    supported claim left without places on purpose."""
    places, label = claim["evidence"], claim["label"]
    if not isinstance(places, list):
        problems.append(f"{where}: evidence is not a list")
        return 0, False
    for place in places:
        check_place(where, place, files, problems)
    keys = [json.dumps(p, sort_keys=True) for p in places]
    if len(set(keys)) != len(keys):
        problems.append(f"{where}: evidence lists a place twice")
    unplaced = label == "supported" and not places and NO_PLACE_NOTE in str(claim["why"])
    if label == "unsupported" and places:
        problems.append(f"{where}: an unsupported claim has evidence places")
    elif label in ("supported", "contradicted") and not places and not unplaced:
        problems.append(f"{where}: a {label} claim has no evidence place "
                        f"(or its why must say '{NO_PLACE_NOTE}')")
    return len(places), unplaced


def check_case(folder: Path, problems: list[str]) -> dict | None:
    loaded = load_case(folder, problems)
    if loaded is None:
        return None
    labels, answer = loaded
    name = folder.name
    claims = check_header(name, labels, problems)
    files = load_evidence(folder, problems)
    spans: list[tuple[int, int, int]] = []
    result: dict = {"style": labels.get("style"), "labels": [], "places": [], "unplaced": 0}
    for i, claim in enumerate(claims):
        where = f"{name}: claim {i + 1}"
        if not isinstance(claim, dict) or set(claim) != CLAIM_KEYS:
            problems.append(f"{where}: expected the keys text, label, why, evidence")
            continue
        start = check_text(where, claim, answer, problems)
        if start is not None:
            spans.append((start, start + len(claim["text"]), i + 1))
        count, unplaced = check_evidence(where, claim, files, problems)
        result["labels"].append(claim["label"])
        result["places"].append(count)
        result["unplaced"] += unplaced
    check_overlaps(name, spans, problems)
    return result


# --- the whole set --------------------------------------------------------------------------------

def label_counts(cases: dict[str, dict]) -> dict:
    per_label = {label: 0 for label in LABELS}
    per_style = {style: {"cases": 0, "claims": 0} for style in STYLES}
    per_style_label = {style: {label: 0 for label in LABELS} for style in STYLES}
    for result in cases.values():
        style = result["style"]
        if style in per_style:
            per_style[style]["cases"] += 1
            per_style[style]["claims"] += len(result["labels"])
        for label in result["labels"]:
            if label in per_label:
                per_label[label] += 1
                if style in per_style_label:
                    per_style_label[style][label] += 1
    total = sum(per_label.values())
    return {
        "claims": total,
        "per_label": per_label,
        "per_label_percent": {k: round(100 * v / total, 1) if total else 0.0
                              for k, v in per_label.items()},
        "per_style": per_style,
        "per_style_label": per_style_label,
    }


def place_counts(cases: dict[str, dict]) -> dict:
    places = {label: 0 for label in LABELS}
    claims_with_places = {label: 0 for label in LABELS}
    for result in cases.values():
        for label, count in zip(result["labels"], result["places"], strict=True):
            if label in places:
                places[label] += count
                claims_with_places[label] += count > 0
    return {
        "places": sum(places.values()),
        "places_per_label": places,
        "claims_with_places_per_label": claims_with_places,
        "supported_without_places": sum(r["unplaced"] for r in cases.values()),
    }


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    problems: list[str] = []
    cases = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / "labels.json").exists()):
        result = check_case(folder, problems)
        if result is not None:
            cases[folder.name] = result
    if not cases:
        problems.append(f"{root}: no case folders with a labels.json")
    report = {"cases": len(cases), **label_counts(cases), "evidence": place_counts(cases),
              "ok": not problems}
    print(json.dumps(report, indent=2))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
