"""An imported run is a stored run like any other, on SQLite and PostgreSQL: origin `import`,
its answer as written kept (`RunRecord.imported`), given back by `verity export`, and
re-judged with the same verdict cap."""

from __future__ import annotations

from pathlib import Path

from models.batch import Selection
from models.bundle import ImportedAnswer, ImportedClaim, RunBundle
from models.common import Verdict
from models.executor import ClaimKind
from models.run import RunRecord
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.reverify import judge
from pipeline.store import RunStore
from pipeline.verification import load_bundle, verify_bundle
from tests.store.samples import make_attempt, make_bundle, make_result

TENANT = "team-a"
"""The owner of this module's runs."""

PASS_BUNDLE = Path(__file__).resolve().parents[2] / "samples" / "bundles" / "pass.json"


def _claim(answer: str, text: str, claim_id: str, kind: ClaimKind, *, bound: bool
           ) -> ImportedClaim:
    """The claim of `answer` whose text is `text`, at its span."""
    start = answer.index(text)
    return ImportedClaim(claim_id=claim_id, text=text, start=start, end=start + len(text),
                         kind=kind, critical=True, hedged=False, action=False, bound=bound)


def _imported_bundle() -> RunBundle:
    """The store samples' bundle, imported: one answer, its claim c1 (executor_output_raw's)."""
    finding = "checkout-service returned HTTP 500 after upstream timeouts"
    answer = f"{finding}. Check the payment gateway latency."
    imported = ImportedAnswer(format="files", agent="other-agent", answer=answer,
                              claims=[_claim(answer, finding, "c1", ClaimKind.FINDING,
                                             bound=True)])
    return make_bundle().model_copy(update={"imported": imported})


def test_an_imported_run_keeps_its_answer_and_exports_it(store: RunStore) -> None:
    bundle = _imported_bundle()
    saved = store.save_verified_run(
        tenant_id=TENANT, bundle=bundle, result=make_result("import-1"),
        events=[("verify", "completed", {})], attempts=[make_attempt("import-1")])

    record = store.get_run(saved, tenant_id=TENANT)
    assert (record.origin, record.origin_run_id) == ("import", "source-run")
    assert record.imported == bundle.imported
    assert RunRecord.model_validate(record.model_dump(mode="json")) == record  # the API's JSON
    assert [r.imported for r in store.list_runs(tenant_id=TENANT)] == [bundle.imported]
    assert [r.imported for r in store.iter_runs(tenant_id=TENANT, selection=Selection(),
                                                summary=True)] == [bundle.imported]
    exported = store.to_bundle(saved, tenant_id=TENANT)
    assert exported.imported == bundle.imported
    assert exported == bundle.model_copy(update={"run_id": saved})
    loaded = store.load_for_judging([saved], tenant_id=TENANT)[saved]
    assert not isinstance(loaded, str)
    stored, rejudged = loaded
    assert stored.imported == rejudged.imported == bundle.imported


def test_a_verified_bundle_without_an_imported_answer_stays_verify(store: RunStore) -> None:
    saved = store.save_verified_run(
        tenant_id=TENANT, bundle=make_bundle(), result=make_result("verify-1"),
        events=[("verify", "completed", {})], attempts=[])

    record = store.get_run(saved, tenant_id=TENANT)
    assert (record.origin, record.imported) == ("verify", None)
    assert store.to_bundle(saved, tenant_id=TENANT).imported is None


def test_an_imported_run_rejudged_keeps_its_capped_verdict(store: RunStore) -> None:
    bundle = load_bundle(PASS_BUNDLE.read_text())
    first = "checkout-service logged 1432 errors between 14:00 and 15:00, returning HTTP 500"
    unbound = "a retry storm from the mobile app overloaded payment-db"
    answer = f"{first}. The root cause is {unbound}."
    imported = ImportedAnswer(format="files", answer=answer, claims=[
        _claim(answer, first, "c1", ClaimKind.FINDING, bound=True),
        _claim(answer, unbound, "c5", ClaimKind.ROOT_CAUSE, bound=False)])
    bundle = bundle.model_copy(update={"imported": imported})
    verifier, composer = OfflineVerifier(), TemplateComposer()
    uncapped = verify_bundle(bundle.model_copy(update={"imported": None}), verifier=verifier,
                             composer=composer)
    assert uncapped.result.verdict is Verdict.PASS  # the cap is what makes it LOW_CONFID
    checked = verify_bundle(bundle, verifier=verifier, composer=composer)
    assert checked.result.verdict is Verdict.LOW_CONFID
    saved = store.save_verified_run(tenant_id=TENANT, bundle=bundle, result=checked.result,
                                    events=checked.events, attempts=checked.attempts)

    loaded = store.load_for_judging([saved], tenant_id=TENANT)[saved]
    assert not isinstance(loaded, str)
    stored, rejudged = loaded
    assert rejudged.imported == imported
    item, _ = judge(0, rejudged, stored, verifier=verifier, composer=composer)
    assert (item.old_verdict, item.new_verdict) == ("LOW_CONFID", "LOW_CONFID")
    assert item.error is None
