"""Human-readable rendering of results with rich: the answer, the verdict, the claims table."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from models.bundle import FinalAnswer, RunResult
from models.delivery import Delivery
from models.invocation import ToolInvocation
from models.run import LlmAttempt

_VERDICT_STYLE = {"PASS": "bold green", "LOW_CONFID": "bold yellow", "REJECT": "bold red"}


def print_result(console: Console, result: RunResult, *, title: str = "Verity") -> None:
    """Status line, answer panel and the claims table."""
    evaluation = result.self_evaluation.verifier_evaluation
    verdict = result.verdict.value if result.verdict else "none"
    head = Text.assemble(
        ("run ", "dim"), (result.run_id, "bold"), ("  status ", "dim"),
        (result.status, "bold green" if result.status == "SUCCESS" else "bold magenta"),
        ("  verdict ", "dim"), (verdict, _VERDICT_STYLE.get(verdict, "dim")),
    )
    if result.fallback_type:
        head.append(f"  fallback {result.fallback_type.value}", style="magenta")
    console.print(head)
    console.print(_answer_panel(result.final_answer, title=title))
    console.print(_claims_table(result))
    gatekeeper = evaluation.gatekeeper_result
    if gatekeeper is not None and gatekeeper.failed_rules:
        failed = ", ".join(rule.value for rule in gatekeeper.failed_rules)
        console.print(Text(f"Gatekeeper failed rules: {failed}", style="yellow"))
    for note in evaluation.downgrades:
        console.print(Text(f"post-check: {note}", style="dim"))
    rules = result.self_evaluation.rule_evaluation
    untrusted = rules.get("untrusted_evidence") or []
    if untrusted:
        console.print(Text(f"untrusted evidence (reads as instructions to an agent, grounds "
                           f"nothing): {', '.join(untrusted)}", style="yellow"))
    for withheld in rules.get("withheld_actions") or []:
        console.print(Text(f"action withheld: {withheld.get('reason')}", style="yellow"))


def _answer_panel(answer: FinalAnswer, *, title: str) -> Panel:
    actions = Text("\n".join(f"• {a}" for a in answer.recommended_actions))
    body = Group(Text(answer.user_facing_answer), Text("\nRecommended actions", style="bold"),
                 actions)
    # Text, not str: rich reads "[...]" in a plain string as markup, and a bundle's query is
    # user input ("[/]" would raise MarkupError).
    return Panel(body, title=Text(title), title_align="left")


def _claims_table(result: RunResult) -> Table:
    evaluation = result.self_evaluation.verifier_evaluation
    table = Table(title="Claims", title_justify="left", expand=True)
    for column in ("claim", "verification", "bindings"):
        table.add_column(column, no_wrap=True)
    table.add_column("claim text", ratio=1, overflow="fold")
    checks = {c.claim_id: c.verification.value for c in evaluation.claim_checks}
    bindings: dict[str, list[str]] = {}
    gatekeeper = evaluation.gatekeeper_result
    for binding in gatekeeper.checked_bindings if gatekeeper else []:
        bindings.setdefault(binding.claim_id, []).append(binding.status)
    verified = evaluation.executor_structured_output
    claims = {c.claim_id: c for c in verified.claims} if verified else {}
    for claim_id, statuses in bindings.items():
        claim = claims.get(claim_id)
        if claim is None:
            text = Text("withheld: no binding passed the Gatekeeper", style="dim")
        else:
            label = f"[{claim.kind.value}{', critical' if claim.critical else ''}] "
            text = Text.assemble((label, "dim"), claim.text)
        passed = statuses.count("pass")
        table.add_row(Text(claim_id), checks.get(claim_id, "not verified"),
                      f"{passed}/{len(statuses)}", text)
    if not bindings:
        table.add_row("-", "-", "-", Text("no claims were checked", style="dim"))
    return table


def print_invocations(console: Console, invocations: Sequence[ToolInvocation]) -> None:
    """A table of every tool call, in order: arguments, status, evidence, and the one-line
    error of a call that failed (a missing or unreachable backend is evidence not seen)."""
    table = Table(title="Tool calls", title_justify="left")
    for column in ("tool", "arguments", "status", "evidence", "error"):
        table.add_column(column)
    for i in invocations:
        arguments = ", ".join(f"{k}={v}" for k, v in i.arguments.items())
        # as text, never markup: "(configure [sources.prod.loki])" is not a style
        table.add_row(Text(i.tool_name), Text(arguments), str(i.status),
                      str(i.evidence_status or ""), Text(i.error or ""))
    console.print(table)


def delivery_target(delivery: Delivery) -> str:
    """Where a delivery goes, without secrets: the webhook URL, or Slack's variable name."""
    if delivery.kind == "slack":
        return f"slack (${delivery.target.get('url_env', '?')})"
    return f"webhook {delivery.target.get('url', '?')}"


def print_deliveries(console: Console, deliveries: Sequence[Delivery]) -> None:
    """The run's notification deliveries, one line each: target, status, attempts (with how
    each ended) and the last error."""
    if not deliveries:
        return
    console.print("Notifications", style="bold")
    for d in deliveries:
        ended = ", ".join(f"{a.outcome} {a.status_code}" if a.status_code else a.outcome
                          for a in d.history)
        line = Text(f"  {delivery_target(d)}: {d.status.value}, "
                    f"{d.attempts}/{d.max_attempts} attempts ({ended or 'none yet'})")
        if d.last_error:
            line.append(f"; {d.last_error}")
        console.print(line)


def print_usage(console: Console, attempts: Sequence[LlmAttempt]) -> None:
    """A table of model attempts with tokens and cost."""
    table = Table(title="Model attempts", title_justify="left")
    for column in ("role", "cycle", "attempt", "model", "outcome", "latency ms", "tokens in/out",
                   "cost $"):
        table.add_column(column)
    for a in attempts:
        table.add_row(a.role, str(a.cycle), str(a.attempt_number), a.model, a.outcome,
                      f"{a.latency_ms:.1f}", f"{a.input_tokens}/{a.output_tokens}",
                      f"{a.cost_usd:.4f}")
    if attempts:
        table.add_row("total", "", str(len(attempts)), "", "", "",
                      f"{sum(a.input_tokens for a in attempts)}/"
                      f"{sum(a.output_tokens for a in attempts)}",
                      f"{sum(a.cost_usd for a in attempts):.4f}")
    console.print(table)
