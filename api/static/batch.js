// The batch report: the verdict transition matrix (rows: the stored verdict, columns: the
// verdict today's prompts and rules give), the flips and what changed.

import { api } from "./api.js";
import { badge, clear, el, label, section, when } from "./dom.js";

const TERMINAL = new Set(["COMPLETED", "COMPLETED_WITH_ERRORS", "CANCELLED"]);

export async function showBatch(root, batchId, { signal }) {
  const body = el("div", { id: "batch" });
  root.append(el("h1", {}, "Re-verification ", el("code", {}, batchId)), body);
  for (;;) {
    const report = await api(`/batches/${encodeURIComponent(batchId)}/report`, { signal });
    renderReport(clear(body), report);
    if (TERMINAL.has(report.batch.status) || signal.aborted) return;
    await new Promise((done) => setTimeout(done, 1000));
  }
}

function renderReport(root, report) {
  const { batch } = report;
  root.append(el("p", { class: "meta" }, badge("status", batch.status),
    ` · ${report.judged} of ${batch.total} judged · ${report.errors} errors`,
    ` · ${report.changed_verdicts} verdicts changed · provider ${batch.provider}`,
    ` · created ${when(batch.created_at)}`));
  root.append(section("Verdict transitions", matrix(report)));
  root.append(section("Flips", flips(report.flips ?? [])));
  root.append(section("Claim class changes", counts(report.claim_class_changes ?? {})));
  root.append(section("Rules", counts(Object.fromEntries(Object.entries(report.rules ?? {}).map(
    ([rule, byOutcome]) => [rule, Object.entries(byOutcome).map(([k, v]) => `${k} ${v}`)
      .join(", ")]))), "rules"));
}

function matrix(report) {
  const labels = report.verdict_labels ?? [];
  if (!labels.length) return el("p", { class: "empty" }, "No item judged yet.");
  const head = el("tr", {}, el("th", {}, "stored ↓ / now →"), labels.map((l) => el("th", {}, l)));
  const rows = labels.filter((old) => report.transitions?.[old]).map((old) => el("tr", {},
    el("th", {}, old), labels.map((now) => {
      const n = report.transitions[old][now] ?? 0;
      const kind = n === 0 ? "zero" : old === now ? "same" : "changed";
      return el("td", { class: kind, dataset: { from: old, to: now } }, String(n));
    })));
  return el("table", { id: "matrix", class: "matrix" }, el("thead", {}, head),
    el("tbody", {}, rows));
}

function flips(list) {
  if (!list.length) return el("p", { class: "empty" }, "No verdict changed.");
  return el("ul", { id: "flips" }, list.map((flip) => el("li", {},
    el("a", { href: `#/runs/${encodeURIComponent(flip.run_id)}` }, flip.run_id), ": ",
    badge("verdict", flip.old_verdict), " → ", badge("verdict", flip.new_verdict),
    flip.failed_rules?.length ? ` · failed rules ${flip.failed_rules.join(", ")}` : null,
    flip.claims?.length ? ` · ${flip.claims.map((c) => `${c.claim_id} ${label(c.old)} → ${label(c.new)}`)
      .join("; ")}` : null,
    flip.rationale ? el("p", { class: "rationale" }, flip.rationale) : null)));
}

function counts(mapping, id) {
  const entries = Object.entries(mapping);
  if (!entries.length) return el("p", { class: "empty" }, "None.");
  return el("dl", { class: "query", id }, entries.map(([k, v]) => [el("dt", {}, k),
    el("dd", {}, String(v))]));
}
