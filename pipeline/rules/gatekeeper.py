"""The Gatekeeper: deterministic checks of every evidence binding, and the verified projection.

Pure: a function of the parsed Executor document and the run's stored invocations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from models.executor import (
    REMOVED_FIELDS,
    Claim,
    ClaimKind,
    EvidenceBinding,
    ExecutorEvidenceV2,
)
from models.gatekeeper import GatekeeperOutcome, RuleId, Severity
from models.invocation import EvidenceStatus, LifecycleStatus, QueryScope, ToolInvocation
from pipeline.rules.jsonpath import PathError, parse_path, resolve
from pipeline.rules.text import normalize, value_text

RULE_ORDER = tuple(RuleId)
_USABLE_EVIDENCE = frozenset({EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE})


@dataclass
class _Audit:
    """Mutable accumulator while checking; validated into a GatekeeperResult at the end.

    Checked bindings are kept as plain field dicts: the whole outcome is validated in one
    pydantic call at the end, which is several times cheaper than one model per binding.
    """

    failures: dict[RuleId, int] = field(default_factory=lambda: dict.fromkeys(RULE_ORDER, 0))
    checked: list[dict[str, Any]] = field(default_factory=list)
    passed: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def fail(self, rule: RuleId, message: str) -> None:
        self.failures[rule] += 1
        self.errors.append(f"{rule.value}: {message}")


def gatekeep(
    document: Mapping[str, Any], invocations: Sequence[ToolInvocation]
) -> GatekeeperOutcome:
    """Check the Executor document against the run's invocations."""
    audit = _Audit()
    output = _check_schema(document, audit)
    verified_claims: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []
    if output is not None:
        first: dict[str, ToolInvocation] = {}
        for inv in invocations:  # a duplicate id never overwrites the first invocation
            first.setdefault(inv.tool_call_id, inv)
        checker = _BindingChecker(first, audit)
        for claim in output.claims:
            passed = checker.check_claim(claim, first_evidence=len(evidence) + 1)
            if not passed:
                if not claim.evidence_bindings:
                    audit.warnings.append(
                        f"claim {claim.claim_id} has no evidence bindings; not verifiable"
                    )
                continue
            verified_claims.append({
                "claim_id": claim.claim_id, "text": claim.text, "kind": claim.kind,
                "critical": claim.critical, "status": claim.status,
            })
            evidence.extend(passed)
    result = _result(audit, schema_ok=output is not None and not audit.failures[RuleId.SCHEMA])
    return GatekeeperOutcome.model_validate({
        "result": result,
        "verified_output": {"claims": verified_claims},
        "verified_evidence": evidence,
    })


def schema_problems(document: Mapping[str, Any]) -> list[str]:
    """What `schema.executor_v2` finds wrong with a document (empty when it holds)."""
    audit = _Audit()
    _check_schema(document, audit)
    return list(audit.errors)


def _check_schema(document: Mapping[str, Any], audit: _Audit) -> ExecutorEvidenceV2 | None:
    """Apply `schema.executor_v2`; return the model when its bindings can still be checked."""
    for name in REMOVED_FIELDS:
        if name in document:
            audit.fail(RuleId.SCHEMA, f"removed field {name!r} is present")
    stripped = {k: v for k, v in document.items() if k not in REMOVED_FIELDS}
    try:
        output = ExecutorEvidenceV2.model_validate(stripped)
    except ValidationError as exc:
        for error in exc.errors()[:20]:
            where = ".".join(str(part) for part in error["loc"])
            audit.fail(RuleId.SCHEMA, f"{where}: {error['msg']}")
        return None
    seen: set[str] = set()
    for claim in output.claims:
        if claim.claim_id in seen:
            audit.fail(RuleId.SCHEMA, f"duplicate claim_id {claim.claim_id!r}")
        seen.add(claim.claim_id)
        if not claim.evidence_bindings:
            # every analysis item cites at least one tool call, a HYPOTHESIS as much as a
            # CONFIRMED claim (harness-contracts: "Draft contains an analysis item")
            audit.fail(RuleId.SCHEMA, f"{claim.status.value.lower()} claim {claim.claim_id} "
                       "has no evidence bindings")
    return output


class _BindingChecker:
    """Checks bindings against stored projections, caching resolved values per run."""

    def __init__(self, invocations: dict[str, ToolInvocation], audit: _Audit) -> None:
        self._invocations = invocations
        self._audit = audit
        self._documents: dict[str, dict[str, Any]] = {}
        self._values: dict[tuple[str, str], str] = {}

    def check_claim(self, claim: Claim, *, first_evidence: int) -> list[dict[str, Any]]:
        """Record each binding's check; return the passed ones as VerifiedEvidence fields,
        numbered E<first_evidence>, E<first_evidence + 1> ...
        """
        passed: list[dict[str, Any]] = []
        audit = self._audit
        claim_id = claim.claim_id
        for index, binding in enumerate(claim.evidence_bindings):
            invocation_id = binding.invocation_id
            tool_name = binding.tool_name
            path = binding.path
            invocation = self._invocations.get(invocation_id)
            failure = self._failure(claim, invocation, binding)
            audit.checked.append({
                "claim_id": claim_id, "index": index, "invocation_id": invocation_id,
                "tool_name": tool_name, "path": path,
                "status": "fail" if failure else "pass",
                "rule": failure[0] if failure else None,
                "reason": failure[1] if failure else None,
            })
            if failure:
                audit.fail(failure[0], f"claim {claim_id} binding {index}: {failure[1]}")
                continue
            assert invocation is not None and invocation.projection is not None
            passed.append({
                "evidence_id": f"E{first_evidence + len(passed)}", "claim_id": claim_id,
                "invocation_id": invocation_id, "tool_name": tool_name, "path": path,
                "matched_text": binding.matched_text,
                "evidence_status": invocation.evidence_status,
                "scope": invocation.projection.scope,
            })
        audit.passed += len(passed)
        return passed

    def _failure(
        self, claim: Claim, invocation: ToolInvocation | None, binding: EvidenceBinding
    ) -> tuple[RuleId, str] | None:
        if invocation is None:
            return RuleId.INVOCATION_REF, (
                f"invocation {binding.invocation_id!r} is not in this run"
            )
        if invocation.tool_name != binding.tool_name:
            return RuleId.INVOCATION_REF, (
                f"tool_name {binding.tool_name!r} differs from stored {invocation.tool_name!r}"
            )
        if invocation.status is not LifecycleStatus.READY or invocation.projection is None:
            return RuleId.INVOCATION_STATUS, (
                f"invocation {binding.invocation_id!r} is {invocation.status}"
            )
        if invocation.evidence_status not in _USABLE_EVIDENCE:
            # READY with an errored or unknown evidence status backs nothing, not even "none".
            return RuleId.INVOCATION_STATUS, (
                f"invocation {binding.invocation_id!r} has evidence status "
                f"{invocation.evidence_status}"
            )
        path = binding.path
        try:
            text = self._value_text(invocation, path)
        except PathError as exc:
            return RuleId.PATH, str(exc)
        needle = normalize(binding.matched_text)
        if not needle:
            return RuleId.MATCHED_TEXT, "matched_text is empty"
        if needle not in text:
            return RuleId.MATCHED_TEXT, f"matched_text not found at {path}"
        if invocation.evidence_status is EvidenceStatus.EVIDENCE_FOUND:
            return None
        return _no_evidence_failure(claim, invocation, path)

    def _value_text(self, invocation: ToolInvocation, path: str) -> str:
        key = (invocation.tool_call_id, path)
        cached = self._values.get(key)
        if cached is None:
            document = self._documents.get(invocation.tool_call_id)
            if document is None:
                assert invocation.projection is not None
                document = invocation.projection.model_dump(mode="json")
                self._documents[invocation.tool_call_id] = document
            cached = normalize(value_text(resolve(document, path)))
            self._values[key] = cached
        return cached


def _no_evidence_failure(
    claim: Claim, invocation: ToolInvocation, path: str
) -> tuple[RuleId, str] | None:
    if claim.kind is not ClaimKind.NEGATIVE_OBSERVATION:
        return RuleId.NO_EVIDENCE_KIND, (
            f"{invocation.evidence_status} invocation cited by a {claim.kind} claim"
        )
    if parse_path(path)[:1] != ("scope",):
        return RuleId.NO_EVIDENCE_KIND, "a negative observation must bind to the query scope"
    return None


def _result(audit: _Audit, *, schema_ok: bool) -> dict[str, Any]:
    """The GatekeeperResult fields."""
    passed = audit.passed
    if not schema_ok or passed == 0:
        severity = Severity.REJECT
    elif passed < len(audit.checked):
        severity = Severity.LOW_CONFID
    else:
        severity = Severity.PASS
    failed = [rule for rule in RULE_ORDER if audit.failures[rule]]
    if schema_ok and passed == 0:
        audit.errors.append("no evidence binding passed")
    return {
        "status": "fail" if failed or severity is Severity.REJECT else "pass",
        "severity": severity,
        "rules": [
            {"rule": rule, "status": "fail" if audit.failures[rule] else "pass",
             "failures": audit.failures[rule]}
            for rule in RULE_ORDER
        ],
        "failed_rules": failed,
        "checked_bindings": audit.checked,
        "warnings": audit.warnings,
        "errors": audit.errors,
    }


def scope_text(scope: QueryScope) -> list[str]:
    """The scope's values as texts, for fact comparison."""
    texts = [scope.service or "", scope.filter or "", scope.note or ""]
    if scope.window is not None:
        texts += [scope.window.start, scope.window.end]
    return [t for t in texts if t]
