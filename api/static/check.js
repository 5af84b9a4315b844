// The view of a checked answer (a run of origin `import`): the verdict and counts, then the
// imported answer exactly as written, each claim's span marked by its verification, beside a
// panel with the selected claim's note and bindings. The answer and the evidence are another
// agent's text: every piece becomes a text node, never markup.

import { api } from "./api.js";
import { append, badge, clear, el, label, section } from "./dom.js";

// Verification classes in the order the counts show them; not_judged: a claim nobody judged (a
// run that ended before the Verifier); action: a recommended action, counted apart from the
// claims (its own judgement, whether it follows from what was kept, is shown when selected).
const ORDER = ["direct_observation", "reasonable_inference", "overstated", "unsupported",
  "external_unknown", "contradicted", "not_judged", "action"];
const NAMES = { direct_observation: "observed", reasonable_inference: "inferred",
  overstated: "overstated", unsupported: "unsupported", external_unknown: "external, unknown",
  contradicted: "contradicted", not_judged: "not judged", action: "action" };

export async function showCheck(root, runId, { signal }) {
  const report = await api(`/checks/${encodeURIComponent(runId)}`, { signal });
  clear(root);
  root.append(verdictSection(report), answerSection(report));
}

function classOf(claim) {
  if (claim.action) return "action";
  return claim.verification ?? "not_judged";
}

function verdictSection(report) {
  const counts = new Map();
  for (const claim of report.claims) {
    const kind = classOf(claim);
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  const stated = report.claims.filter((c) => !c.action).length;
  const list = el("ul", { id: "check-counts", class: "counts" });
  for (const kind of ORDER) {
    const n = counts.get(kind);
    if (n) {
      list.append(el("li", { class: `chip v-${kind}`, dataset: { verification: kind, count: n } },
        `${n} ${NAMES[kind]}`));
    }
  }
  const body = el("div", { id: "check" },
    el("p", { class: "meta" }, "verdict ", badge("verdict", report.verdict ?? "none"),
      report.fallback_type ? [" · fallback ", badge("fallback", report.fallback_type)] : null,
      ` · ${stated} claim${stated === 1 ? "" : "s"} in the ${report.format} answer`,
      report.agent ? [" by ", el("strong", {}, report.agent)] : null),
    list,
    el("p", { class: "summary", id: "check-summary" }, report.summary));
  return section("Checked answer", body);
}

function answerSection(report) {
  const panel = el("aside", { id: "check-evidence", class: "evidence", "aria-live": "polite" },
    el("p", { class: "empty" }, "Select a marked sentence to see how it was judged and the "
      + "tool output it is bound to."));
  const text = el("div", { id: "checked-answer", class: "checked-answer" });
  const marks = [];
  // a claim as a node to select by click, focus (Tab), Enter or Space
  const markOf = (claim, tag) => {
    const kind = classOf(claim);
    const node = el(tag, { class: `claim-span v-${kind}${claim.critical ? " critical" : ""}`,
      tabindex: "0", role: "button", "aria-pressed": "false",
      title: `${claim.claim_id} · ${NAMES[kind]}${claim.critical ? " · critical" : ""}`,
      dataset: { claim: claim.claim_id, verification: kind } });
    const open = () => {
      for (const other of marks) other.setAttribute("aria-pressed", "false");
      node.setAttribute("aria-pressed", "true");
      showClaim(panel, claim);
    };
    node.addEventListener("click", open);
    node.addEventListener("focus", open);
    node.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        open();
      }
    });
    marks.push(node);
    return node;
  };
  const unplaced = layOut(text, report.answer, report.claims, (claim) => markOf(claim, "span"));
  const left = el("div", { class: "checked-text" }, text);
  if (unplaced.length) {
    // a span that is not where the answer says: the claim is still reachable, as a list item
    left.append(el("h3", {}, "Claims not located in the answer"), el("ul", { class: "unplaced" },
      unplaced.map((claim) => append(markOf(claim, "li"), [claim.text]))));
  }
  left.append(el("p", { class: "legend meta" }, "As written, not rendered. Each claim is "
    + "coloured by how it was judged; a critical one carries a ",
  el("span", { class: "bang" }, "!"), ". Select one (click, or Tab to it) to see its evidence."));
  return section("The answer as written, beside its evidence",
    el("div", { class: "claims-layout" }, left, panel));
}

// Write `answer` into `root` as text, each claim's span (offsets in code points, as Python
// counts them) as the text of the node `wrap(claim)` gives; the claims whose span is out of
// range or overlaps another are returned.
function layOut(root, answer, claims, wrap) {
  const chars = Array.from(answer ?? "");
  const sorted = [...claims].sort((a, b) => a.span[0] - b.span[0] || a.span[1] - b.span[1]);
  const unplaced = [];
  let at = 0;
  for (const claim of sorted) {
    const [start, end] = claim.span ?? [];
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < at || end <= start
        || end > chars.length) {
      unplaced.push(claim);
      continue;
    }
    if (start > at) root.append(chars.slice(at, start).join(""));
    const node = wrap(claim);
    node.textContent = chars.slice(start, end).join("");
    root.append(node);
    at = end;
  }
  if (at < chars.length) root.append(chars.slice(at).join(""));
  return unplaced;
}

function showClaim(panel, claim) {
  clear(panel);
  const kind = classOf(claim);
  panel.append(el("h3", {}, `Claim ${claim.claim_id}`),
    el("p", { class: "claim-tags" }, el("span", { class: `chip v-${kind}`, id: "check-verification",
      dataset: { verification: kind } }, NAMES[kind]),
    " ", label(claim.kind), claim.critical ? " · critical" : null,
    claim.hedged ? " · hedged" : null, claim.action ? " · recommended action" : null,
    claim.action && claim.verification
      ? [" · ", el("span", { class: `chip v-${claim.verification}`, id: "check-action-verification",
        dataset: { verification: claim.verification } }, NAMES[claim.verification])]
      : null),
    el("p", { class: "claim-text" }, claim.text));
  if (claim.note) panel.append(el("p", { class: "note", id: "check-note" }, "Why: ", claim.note));
  if (claim.action) {
    panel.append(el("p", { class: "empty" }, claim.verification
      ? "A recommended action: it follows when what it names is in the claims kept, their "
        + "evidence or the runbook steps the run retrieved."
      : "A recommended action: not judged."));
  }
  if (!claim.bindings.length) {
    if (!claim.action) panel.append(el("p", { class: "empty" }, "Bound to no tool output."));
    return;
  }
  panel.append(el("h3", {}, `Bound to ${claim.bindings.length} value`
    + `${claim.bindings.length === 1 ? "" : "s"} of the tool output`));
  for (const binding of claim.bindings) {
    panel.append(el("div", { class: "binding" },
      el("dl", { class: "query" },
        el("dt", {}, "tool"), el("dd", { class: "binding-tool" }, binding.tool_name),
        el("dt", {}, "tool call"), el("dd", {}, el("code", { class: "binding-call" },
          binding.tool_call_id)),
        el("dt", {}, "path"), el("dd", {}, el("code", { class: "binding-path" }, binding.path)),
        el("dt", {}, "matched text"),
        el("dd", {}, el("pre", { class: "excerpt binding-match" }, binding.matched_text)))));
  }
}
