"""What a delivery says, built from the released run: the verdict, the summary, the confirmed
findings with their evidence, the gaps and a link to the run's page (only when a public base
URL is configured). Pure functions of the run record.

Run text (the query, the answer, evidence quoted from logs) is data, never markup: in the
Slack text `&`, `<` and `>` are escaped as Slack's formatting reference asks, so no `<!here>`,
`<@U…>` or `<url|label>` can be formed by it, and the bare forms Slack would still turn into a
mention or a link (`@here`, `@channel`, `@everyone`, `scheme://`) get a zero-width space.
"""

from __future__ import annotations

import re
from typing import Any

from models.common import Verdict
from models.executor import ClaimStatus
from models.run import RunRecord
from models.verifier import Verification

MAX_ITEMS = 10
"""Findings and gaps listed at most (the rest are counted)."""
MAX_TEXT = 300
"""Characters of one finding, quote or gap kept."""
_SUPPORTED = {Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE}
_ZWSP = "\u200b"
_BARE_MENTION = re.compile(r"@(here|channel|everyone)\b", re.IGNORECASE)
_BARE_LINK = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(//)")


def page_url(public_url: str | None, run_id: str) -> str | None:
    """The run's page under the public base URL, None without one."""
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/#/runs/{run_id}"


def slack_escape(text: str) -> str:
    """Run text made inert in a Slack message: `&`, `<`, `>` escaped, bare mentions and
    links broken by a zero-width space."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    escaped = _BARE_MENTION.sub(lambda m: f"@{_ZWSP}{m.group(1)}", escaped)
    return _BARE_LINK.sub(lambda m: f"{m.group(1)}:{_ZWSP}{m.group(2)}", escaped)


def findings(run: RunRecord) -> list[dict[str, Any]]:
    """The confirmed findings: CONFIRMED claims the Verifier found supported, each with its
    evidence (tool and the text matched in its output)."""
    evaluation = run.self_evaluation.verifier_evaluation if run.self_evaluation else None
    output = evaluation.executor_structured_output if evaluation else None
    if evaluation is None or output is None:
        return []
    checks = {check.claim_id: check.verification for check in evaluation.claim_checks}
    found = []
    for claim in output.claims:
        if claim.status is not ClaimStatus.CONFIRMED or checks.get(claim.claim_id) not in \
                _SUPPORTED:
            continue
        evidence = [{"tool": e.tool_name, "text": _clip(e.matched_text)}
                    for e in evaluation.verified_evidence if e.claim_id == claim.claim_id]
        found.append({"claim_id": claim.claim_id, "text": _clip(claim.text),
                      "evidence": evidence})
    return found


def gaps(run: RunRecord) -> list[str]:
    """What the Verifier said is missing."""
    evaluation = run.self_evaluation.verifier_evaluation if run.self_evaluation else None
    return [_clip(gap.description) for gap in (evaluation.evidence_gaps if evaluation else [])]


def webhook_body(run: RunRecord, *, delivery_id: str, public_url: str | None
                 ) -> dict[str, Any]:
    """The generic webhook's JSON document."""
    answer = run.final_answer
    return {
        "delivery_id": delivery_id,
        "run_id": run.run_id,
        "tenant_id": run.tenant_id,
        "query": run.query,
        "status": run.status.value,
        "verdict": run.verdict.value if run.verdict else None,
        "fallback_type": run.fallback_type.value if run.fallback_type else None,
        "summary": answer.answer_summary if answer else None,
        "findings": findings(run),
        "gaps": gaps(run),
        "url": page_url(public_url, run.run_id),
    }


def slack_message(run: RunRecord, *, public_url: str | None) -> dict[str, Any]:
    """The Slack incoming-webhook payload: one mrkdwn text, links not unfurled."""
    outcome = run.verdict.value if run.verdict else run.status.value
    if run.fallback_type is not None:
        outcome = f"FALLBACK ({run.fallback_type.value})"
    lines = [f"{_icon(run.verdict)} *Verity: {outcome}* - {slack_escape(_clip(run.query))}"]
    if run.final_answer is not None:
        lines.append(f"*Summary:* {slack_escape(_clip(run.final_answer.answer_summary))}")
    confirmed = findings(run)
    if confirmed:
        lines.append("*Confirmed findings:*")
        for finding in confirmed[:MAX_ITEMS]:
            lines.append(f"• {slack_escape(finding['text'])}")
            lines.extend(f"    ◦ `{slack_escape(e['tool'])}`: {slack_escape(e['text'])}"
                         for e in finding["evidence"][:3])
        lines.extend(_more(len(confirmed)))
    missing = gaps(run)
    if missing:
        lines.append("*Gaps:*")
        lines.extend(f"• {slack_escape(gap)}" for gap in missing[:MAX_ITEMS])
        lines.extend(_more(len(missing)))
    link = page_url(public_url, run.run_id)
    if link is not None:
        lines.append(f"<{link}|Open run {run.run_id}>")
    return {"text": "\n".join(lines), "mrkdwn": True, "unfurl_links": False,
            "unfurl_media": False}


def _icon(verdict: Verdict | None) -> str:
    return {Verdict.PASS: ":white_check_mark:", Verdict.LOW_CONFID: ":warning:"}.get(
        verdict, ":x:") if verdict is not None else ":grey_question:"


def _more(count: int) -> list[str]:
    return [f"… and {count - MAX_ITEMS} more"] if count > MAX_ITEMS else []


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
