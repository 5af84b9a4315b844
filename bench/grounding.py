"""Grounding of claims about real log lines, printed as one JSON object on stdout.

    python bench/grounding.py [--build]

The claim set (`bench/data/grounding_claims.json`) is built from the loghub sample in
`bench/data/loghub/` (30 lines of each of ten systems; see its README): `--build` rebuilds it
from the lines, deterministically. Each claim restates one log line and is labelled:

- faithful: the message verbatim, each fact-bearing token named alone, `key=value` restated as
  `key value`, `host:port` as `host H port P`, a number restated without its unit;
- swapped_identifier: a token with digits replaced by the token of the same shape from the
  nearest other line of the same system that differs (`blk_-58…` for `blk_-53…`);
- changed_digit: the last digit of such a token changed (`storage1231` -> `storage1232`);
- changed_number: a number one larger;
- changed_unit: a number's unit changed within its dimension (`16 ms` -> `16 s`);
- negation: the message negated.

The tokens perturbed and their kind (ip, hex, uuid, block, path, url, id, number, quantity)
are chosen by this script's own tokenizer, not by the extractor under test. Every claim is a
critical FINDING bound to its whole line (a search_logs invocation per line), gatekept and
handed to two Verifiers: the offline Verifier, and a lenient one that says PASS and
`direct_observation` to every claim, followed by the deterministic post-check. Reported per
label and kind: faithful claims kept as `direct_observation`, perturbed ones caught (anything
else) and contradicted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.common import Intent, Verdict  # noqa: E402
from models.invocation import (  # noqa: E402
    EvidenceStatus,
    LifecycleStatus,
    Projection,
    QueryScope,
    ToolInvocation,
)
from models.verifier import ClaimCheck, Verification, VerifierInput, VerifierOutput  # noqa: E402
from pipeline.agents import offline_verifier  # noqa: E402
from pipeline.rules.gatekeeper import gatekeep  # noqa: E402
from pipeline.rules.guards import post_check  # noqa: E402
from pipeline.rules.text import normalize  # noqa: E402
from pipeline.rules.verifier_input import build_verifier_input  # noqa: E402

DATA = ROOT / "bench" / "data"
LOGS = DATA / "loghub"
CLAIMS = DATA / "grounding_claims.json"
SYSTEMS = ("OpenStack", "HDFS", "Zookeeper", "BGL", "HPC", "Linux", "OpenSSH", "Spark",
           "Hadoop", "Apache")
PERTURBED = ("swapped_identifier", "changed_digit", "changed_number", "changed_unit")
TARGETS = {"faithful_kept": 0.95, "perturbed_caught_by_post_check": 1.0}

# -- this script's own tokenizer: what a careful reader would call a fact-bearing token --------
_TOKEN = re.compile(r"[^\s\[\](){}<>,;\"'|=]+")
_UNITS = {"ms": "s", "s": "ms", "seconds": "ms", "sec": "ms", "kb": "MB", "mb": "GB",
          "gb": "MB", "bytes": "KB", "%": " ms"}
_NUMBER_UNIT = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)( ?)(ms|seconds|sec|s|KB|MB|GB|kb|mb|gb|bytes|%)(?![\w])")


def token_kind(token: str) -> str | None:
    """The kind of a token that states a fact (None for words without digits)."""
    if not any(c.isdigit() for c in token):
        return None
    if re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+", token):
        return "url"
    if re.fullmatch(r"/?\d{1,3}(\.\d{1,3}){3}(:\d+)?", token) or re.fullmatch(
            r"[0-9a-fA-F:]*::?[0-9a-fA-F:]+(:\d+)?", token) and token.count(":") >= 4:
        return "ip"
    if re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", token):
        return "uuid"
    if re.fullmatch(r"blk_-?\d+", token):
        return "block"
    if re.fullmatch(r"0x[0-9a-fA-F]+", token) or (
            re.fullmatch(r"[0-9a-fA-F]{8,}", token) and re.search(r"[a-fA-F]", token)):
        return "hex"
    if token.startswith("/") and token.count("/") >= 2:
        return "path"
    if re.fullmatch(r"-?\d+(\.\d+)?", token):
        return "number"
    if re.fullmatch(r"[A-Za-z0-9][\w.:@$#+-]*", token):
        return "id"
    return None


def _clean(token: str) -> str:
    return token.strip(".:!?*")


def fact_tokens(message: str) -> list[tuple[str, str]]:
    """(token, kind) for every fact-bearing token of a message, in order, once each."""
    seen: dict[str, str] = {}
    for raw in _TOKEN.findall(message):
        token = _clean(raw)
        kind = token_kind(token)
        if kind is not None and token not in seen:
            seen[token] = kind
    return list(seen.items())


def _signature(token: str) -> str:
    return re.sub(r"[A-Za-z]+", "a", re.sub(r"\d+", "9", token))


# -- building the claim set --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LabelledClaim:
    """One claim about one log line, with what it is."""

    claim_id: str
    system: str
    line: int
    text: str
    label: str
    """faithful, swapped_identifier, changed_digit, changed_number, changed_unit, negation."""
    kind: str
    """The kind of the fact restated or perturbed (`message` for a whole message)."""
    token: str = ""
    replacement: str = ""


def read_lines(system: str) -> list[str]:
    """The shipped sample lines of one system, normalized as evidence is."""
    return [normalize(line) for line in (LOGS / f"{system}.log").read_text().splitlines()
            if line.strip()]


def message_of(system: str, line: str) -> str:
    """The line without its header (timestamp, host, level), where each system puts one."""
    for pattern in _HEADERS.get(system, ()):
        match = re.match(pattern, line)
        if match:
            return line[match.end():].strip()
    return line


_HEADERS = {
    "OpenStack": (r"\S+ \S+ \S+ \d+ \w+ \S+ \[[^\]]*\] ",),
    "HDFS": (r"\d{6} \d{6} \d+ \w+ \S+: ",),
    "Zookeeper": (r"\S+ \S+ - \w+ +\[[^\]]*\] - ",),
    "BGL": (r"\S+ \d+ \S+ \S+ \S+ \S+ \w+ \w+ \w+ ",),
    "HPC": (r"\d+ \S+ ",),
    "Linux": (r"\w{3} +\d+ \S+ \S+ [^:]+: ",),
    "OpenSSH": (r"\w{3} +\d+ \S+ \S+ [^:]+: ",),
    "Spark": (r"\S+ \S+ \w+ \S+: ",),
    "Hadoop": (r"\S+ \S+ \w+ \[[^\]]*\] \S+: ",),
    "Apache": (r"\[[^\]]*\] \[\w+\] ",),
}


def _negate(message: str) -> str:
    for pattern, repl in ((r"\b(is|was|are|were|has|have)\b", r"\1 not"),
                          (r"\b(Failed|failed)\b", "did not fail:"),
                          (r"\b(\w+ed)\b", r"was not \1")):
        negated, count = re.subn(pattern, repl, message, count=1)
        if count:
            return negated
    return "It is not the case that " + message


def _bump_digit(token: str) -> str:
    digits = [i for i, c in enumerate(token) if c.isdigit()]
    i = digits[-1]
    return token[:i] + str((int(token[i]) + 1) % 10) + token[i + 1:]


def _bump_number(token: str) -> str:
    if "." in token:
        whole, frac = token.split(".")
        return f"{whole}.{int(frac) + 1:0{len(frac)}d}"[: len(token) + 1]
    return str(int(token) + 1)


def claims_for(system: str, lines: Sequence[str]) -> list[LabelledClaim]:
    """Every labelled claim about the lines of one system."""
    claims: list[LabelledClaim] = []
    tokens = [fact_tokens(message_of(system, line)) for line in lines]

    def add(i: int, text: str, label: str, kind: str, token: str = "", repl: str = "") -> None:
        if label in PERTURBED and _occurs(repl, lines[i]):
            SKIPPED[label] += 1  # the new value is stated elsewhere in the line
            return
        claims.append(LabelledClaim(f"{system}-{len(claims) + 1}", system, i, text, label,
                                    kind, token, repl))

    for i, line in enumerate(lines):
        message = message_of(system, line)
        add(i, f"{system} logged: {message}", "faithful", "message")
        add(i, f"{system} logged: {_negate(message)}", "negation", "message")
        for token, kind in tokens[i]:
            add(i, f"The {system} line names {token}.", "faithful", kind, token)
            swap = _neighbour_token(tokens, i, token, kind)
            if swap is not None and kind != "number":
                add(i, f"{system} logged: {message.replace(token, swap)}",
                    "swapped_identifier", kind, token, swap)
            if kind == "number":
                bumped = _bump_number(token)
                add(i, f"{system} logged: {_replace_token(message, token, bumped)}",
                    "changed_number", kind, token, bumped)
            elif kind != "url":
                bumped = _bump_digit(token)
                add(i, f"{system} logged: {message.replace(token, bumped)}", "changed_digit",
                    kind, token, bumped)
        for key, value in re.findall(r"\b([A-Za-z_]\w*)=([^\s,;=()\[\]]+)", message):
            if token_kind(_clean(value)) is not None:
                add(i, f"The {system} line gives {key} {_clean(value)}.", "faithful", "kv",
                    f"{key}={value}")
        for host, port in re.findall(r"(\d{1,3}(?:\.\d{1,3}){3}):(\d+)", message):
            add(i, f"The {system} line names host {host} port {port}.", "faithful", "ip",
                f"{host}:{port}")
        for match in _NUMBER_UNIT.finditer(message):
            number, space, unit = match.groups()
            add(i, f"The {system} line gives the value {number}.", "faithful", "quantity",
                match.group())
            other = _UNITS[unit.lower()] if unit.lower() in _UNITS else "ms"
            changed = message[:match.start()] + number + space + other.strip() + message[
                match.end():]
            add(i, f"{system} logged: {changed}", "changed_unit", "quantity", match.group(),
                number + space + other.strip())
    return claims


SKIPPED: dict[str, int] = defaultdict(int)
"""Perturbations not made because the new value occurs elsewhere in the line (`slot 1` made
`slot 2` on a line that also says `2`): no check of values against values can tell them."""


def _occurs(value: str, line: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", line) is not None


def _replace_token(message: str, token: str, replacement: str) -> str:
    return re.sub(rf"(?<![\w.]){re.escape(token)}(?![\w]|\.\d)", replacement, message, count=1)


def _neighbour_token(tokens: Sequence[Sequence[tuple[str, str]]], i: int, token: str,
                     kind: str) -> str | None:
    """The token of the same kind and shape on the nearest other line that differs."""
    signature = _signature(token)
    for distance in range(1, len(tokens)):
        for j in (i + distance, i - distance):
            if 0 <= j < len(tokens):
                for other, other_kind in tokens[j]:
                    if (other_kind == kind and other != token and _signature(other) == signature
                            and other not in token and token not in other):
                        return other
    return None


def build_claims() -> list[LabelledClaim]:
    """The whole labelled claim set, from the shipped lines (and `SKIPPED`, counted anew)."""
    SKIPPED.clear()
    return [c for system in SYSTEMS for c in claims_for(system, read_lines(system))]


# -- measuring ---------------------------------------------------------------------------------

def _invocations(system: str, lines: Sequence[str]) -> list[ToolInvocation]:
    return [
        ToolInvocation(
            tool_call_id=f"toolu_{system}_{i:03d}", tool_name="search_logs",
            arguments={"service": system.lower()}, status=LifecycleStatus.READY,
            evidence_status=EvidenceStatus.EVIDENCE_FOUND,
            projection=Projection(scope=QueryScope(service=system.lower()),
                                  hits=[{"message": line}]),  # type: ignore[call-arg]
        )
        for i, line in enumerate(lines)
    ]


def verifier_input_for(system: str, claims: Sequence[LabelledClaim]) -> VerifierInput:
    """The Verifier input of one system's claims, each bound to its whole line, gatekept."""
    lines = read_lines(system)
    document = {"claims": [
        {"claim_id": c.claim_id, "text": c.text, "kind": "FINDING", "critical": True,
         "status": "CONFIRMED", "evidence_bindings": [{
             "invocation_id": f"toolu_{system}_{c.line:03d}", "tool_name": "search_logs",
             "path": "$.hits[0].message", "matched_text": lines[c.line]}]}
        for c in claims
    ], "hypotheses": [], "missing_info": [], "recommended_actions": []}
    outcome = gatekeep(document, _invocations(system, lines))
    failed = [b for b in outcome.result.checked_bindings if b.status != "pass"]
    if failed:
        raise RuntimeError(f"{system}: {len(failed)} bindings failed the Gatekeeper")
    return build_verifier_input(outcome, query=f"What does the {system} log show?",
                                intent=Intent.DIAGNOSIS)


def lenient_output(verifier_input: VerifierInput) -> VerifierOutput:
    """A Verifier that says PASS and direct_observation to everything."""
    checks = [ClaimCheck(claim_id=c.claim_id, verification=Verification.DIRECT_OBSERVATION,
                         evidence_refs=[])
              for c in verifier_input.verified_executor_output.claims]
    return VerifierOutput(verdict=Verdict.PASS, groundedness_score=1.0, rationale="lenient",
                          claim_checks=checks, evidence_gaps=[])


def judge(claims: Sequence[LabelledClaim]) -> dict[str, dict[str, Verification]]:
    """Each claim's verification under both Verifiers: {"offline"|"post_check": {id: v}}."""
    by_system: dict[str, list[LabelledClaim]] = defaultdict(list)
    for claim in claims:
        by_system[claim.system].append(claim)
    result: dict[str, dict[str, Verification]] = {"offline": {}, "post_check": {}}
    for system, mine in by_system.items():
        verifier_input = verifier_input_for(system, mine)
        offline = offline_verifier.verify(verifier_input)
        result["offline"].update({c.claim_id: c.verification for c in offline.claim_checks})
        checked = post_check(lenient_output(verifier_input), verifier_input)
        result["post_check"].update({c.claim_id: c.verification for c in checked.claim_checks})
    return result


def _rate(hits: int, total: int) -> float | None:
    return round(100.0 * hits / total, 1) if total else None


def measure(claims: Sequence[LabelledClaim]) -> dict[str, Any]:
    """The report: per verifier, per label and kind, kept / caught / contradicted in percent."""
    verdicts = judge(claims)
    report: dict[str, Any] = {}
    for verifier, checks in verdicts.items():
        table: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        groups: dict[tuple[str, str], list[Verification]] = defaultdict(list)
        for claim in claims:
            groups[(claim.label, claim.kind)].append(checks[claim.claim_id])
            groups[(claim.label, "all")].append(checks[claim.claim_id])
        for (label, kind), found in sorted(groups.items()):
            direct = sum(v is Verification.DIRECT_OBSERVATION for v in found)
            row: dict[str, Any] = {"claims": len(found)}
            if label == "faithful":
                row["kept_pct"] = _rate(direct, len(found))
            else:
                row["caught_pct"] = _rate(len(found) - direct, len(found))
                row["contradicted_pct"] = _rate(
                    sum(v is Verification.CONTRADICTED for v in found), len(found))
            table[label][kind] = row
        report[verifier] = table
    missed = [asdict(c) for c in claims
              if c.label in PERTURBED
              and verdicts["post_check"][c.claim_id] is Verification.DIRECT_OBSERVATION]
    refused = [asdict(c) for c in claims if c.label == "faithful"
               and verdicts["post_check"][c.claim_id] is not Verification.DIRECT_OBSERVATION]
    post = report["post_check"]
    caught = {label: post[label]["all"]["caught_pct"] for label in PERTURBED if label in post}
    report["targets"] = {
        "faithful_kept_pct_min": 100 * TARGETS["faithful_kept"],
        "perturbed_caught_by_post_check_pct": 100 * TARGETS["perturbed_caught_by_post_check"],
        "met": (post["faithful"]["all"]["kept_pct"] >= 100 * TARGETS["faithful_kept"]
                and all(v == 100.0 for v in caught.values())),
    }
    report["post_check_missed"] = missed[:20]
    report["post_check_refused_faithful"] = refused[:20]
    return report


def load_claims(path: Path = CLAIMS) -> list[LabelledClaim]:
    """The shipped labelled claim set."""
    return [LabelledClaim(**row) for row in json.loads(path.read_text())["claims"]]


def write_claims(claims: Iterable[LabelledClaim], path: Path = CLAIMS) -> None:
    """Ship the claim set with a note of where it comes from."""
    payload = {"source": "loghub (https://github.com/logpai/loghub), see bench/data/loghub/",
               "built_by": "python bench/grounding.py --build",
               "skipped_indistinguishable": dict(sorted(SKIPPED.items())),
               "claims": [asdict(c) for c in claims]}
    # one claim a line: diffs of a rebuild stay readable, the file stays small
    head = json.dumps({k: v for k, v in payload.items() if k != "claims"}, ensure_ascii=False)
    rows = ",\n".join(json.dumps(row, ensure_ascii=False) for row in payload["claims"])
    path.write_text(head[:-1] + ', "claims": [\n' + rows + "\n]}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="store_true", help="rebuild the shipped claim set")
    args = parser.parse_args(argv)
    if args.build:
        write_claims(build_claims())
        print(f"wrote {CLAIMS.relative_to(ROOT)}", file=sys.stderr)
    claims = load_claims()
    skipped = json.loads(CLAIMS.read_text()).get("skipped_indistinguishable", {})
    counts: dict[str, int] = defaultdict(int)
    for claim in claims:
        counts[claim.label] += 1
    report = {"benchmark": "grounding", "source": "loghub, 30 lines x 10 systems",
              "claims": len(claims), "by_label": dict(sorted(counts.items())),
              "perturbations_skipped_indistinguishable": skipped,
              **measure(claims)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
