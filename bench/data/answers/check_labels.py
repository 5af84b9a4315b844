"""Check the hand-labelled answer set and print its counts.

    .venv/bin/python bench/data/answers/check_labels.py [DIR]

DIR defaults to the folder of this script. Every sub-folder with a labels.json is a case:

- labels.json has a question, a style (bullets, prose, sections, table, mixed) and claims;
- every claim has a text, a label (supported, contradicted, unsupported) and a why;
- every claim text occurs exactly once in answer.md, and no two claims overlap there;
- evidence/ holds at least one file, each .json (parsed as JSON), .txt or .log.

Prints the counts per label, per style and in total as JSON; exits 1 (after listing the
problems on stderr) when a check fails. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LABELS = ("supported", "contradicted", "unsupported")
STYLES = ("bullets", "prose", "sections", "table", "mixed")
EVIDENCE_SUFFIXES = (".json", ".txt", ".log")


def occurrences(haystack: str, needle: str) -> list[int]:
    """Start offsets of every occurrence of needle, overlapping ones included."""
    found, start = [], 0
    while True:
        at = haystack.find(needle, start)
        if at < 0:
            return found
        found.append(at)
        start = at + 1


def check_case(folder: Path, problems: list[str]) -> dict | None:  # noqa: C901 (one list of checks)
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

    if set(labels) != {"question", "style", "claims"}:
        problems.append(f"{name}: labels.json keys are {sorted(labels)}, "
                        "expected question, style, claims")
    if not isinstance(labels.get("question"), str) or not labels.get("question", "").strip():
        problems.append(f"{name}: question is missing or empty")
    style = labels.get("style")
    if style not in STYLES:
        problems.append(f"{name}: style {style!r} is not one of {', '.join(STYLES)}")
    claims = labels.get("claims")
    if not isinstance(claims, list) or not claims:
        problems.append(f"{name}: claims is missing or empty")
        claims = []

    spans: list[tuple[int, int, int]] = []
    for i, claim in enumerate(claims):
        where = f"{name}: claim {i + 1}"
        if not isinstance(claim, dict) or set(claim) != {"text", "label", "why"}:
            problems.append(f"{where}: expected the keys text, label, why")
            continue
        text, label, why = claim["text"], claim["label"], claim["why"]
        if label not in LABELS:
            problems.append(f"{where}: label {label!r} is not one of {', '.join(LABELS)}")
        if not isinstance(why, str) or not why.strip():
            problems.append(f"{where}: why is empty")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"{where}: text is empty")
            continue
        if text != text.strip() or "\n" in text:
            problems.append(f"{where}: text has surrounding blanks or a line break: {text!r}")
        hits = occurrences(answer, text)
        if len(hits) != 1:
            problems.append(f"{where}: text occurs {len(hits)} times in answer.md: {text!r}")
        else:
            spans.append((hits[0], hits[0] + len(text), i + 1))
    spans.sort()
    for (_, e1, n1), (s2, _, n2) in zip(spans, spans[1:], strict=False):
        if s2 < e1:
            problems.append(f"{name}: claims {n1} and {n2} overlap in answer.md")

    evidence = folder / "evidence"
    files = sorted(p for p in evidence.iterdir() if p.is_file()) if evidence.is_dir() else []
    if not files:
        problems.append(f"{name}: evidence/ is missing or empty")
    for path in files:
        if path.suffix not in EVIDENCE_SUFFIXES:
            problems.append(f"{name}: evidence/{path.name}: not .json, .txt or .log")
        elif path.suffix == ".json":
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                problems.append(f"{name}: evidence/{path.name}: invalid JSON: {exc}")
    return {"style": style, "labels": [c.get("label") for c in claims if isinstance(c, dict)]}


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
    report = {
        "cases": len(cases),
        "claims": total,
        "per_label": per_label,
        "per_label_percent": {k: round(100 * v / total, 1) if total else 0.0
                              for k, v in per_label.items()},
        "per_style": per_style,
        "per_style_label": per_style_label,
        "ok": not problems,
    }
    print(json.dumps(report, indent=2))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
