// The run view: the nodes as their events arrive, then the answer, every claim with its
// verification class beside the evidence it is bound to, the Gatekeeper's failed bindings
// and the evidence gaps, then where the answer was sent (notification deliveries). A run of origin `import` (another agent's answer, checked) shows as
// check.js lays it out.

import { api, ApiError, followEvents } from "./api.js";
import { showCheck } from "./check.js";
import { badge, clear, el, label, marked, section, when } from "./dom.js";
import { resolvePath } from "./jsonpath.js";

const EXCERPT_MAX = 4000;
const TERMINAL = new Set(["SUCCESS", "FALLBACK", "FAILED", "CANCELLED"]);

export async function showRun(root, runId, { signal, notify }) {
  const parts = {
    status: el("span", { id: "run-status" }),
    verdict: el("span", { id: "run-verdict" }),
    nodes: el("ol", { id: "nodes", class: "nodes" }),
    result: el("div", { id: "run-result" }),
  };
  const title = el("h1", { id: "run-question" }, "Run ", runId);
  const origin = el("span", { id: "run-origin" });
  const progress = section("Progress", parts.nodes);
  root.append(el("div", { class: "run-head" }, title,
    el("p", { class: "meta" }, "status ", parts.status, " · verdict ", parts.verdict,
      " · run ", el("code", {}, runId), origin)),
  progress, parts.result);
  const record = await api(`/runs/${encodeURIComponent(runId)}`, { signal });
  title.textContent = record.query;
  setStatus(parts, record);
  if (record.source === "import") {
    origin.append(" · ", originMark());
    progress.remove();
    await showCheck(parts.result, runId, { signal });
    return;
  }
  await followEvents(runId, {
    signal,
    onEvent: (event) => {
      addEvent(parts.nodes, event);
      if (!TERMINAL.has(record.status)) parts.status.replaceChildren(badge("status", "RUNNING"));
    },
    onEnd: () => {},
  });
  const [done, bundle] = await Promise.all([
    api(`/runs/${encodeURIComponent(runId)}`, { signal }),
    api(`/runs/${encodeURIComponent(runId)}/bundle`, { signal }).catch((error) => {
      if (error instanceof ApiError && error.status === 409) return null;
      notify(error.message);
      return null;
    }),
  ]);
  setStatus(parts, done);
  renderResult(parts.result, done, bundle);
  const sent = await api(`/runs/${encodeURIComponent(runId)}/deliveries`, { signal })
    .catch((error) => { notify(error.message); return null; });
  if (sent?.deliveries?.length) parts.result.append(deliveriesSection(sent.deliveries));
}

// Where the answer went: each notification target (never a secret), its status, and every
// attempt with the receiver's answer or the error.
function deliveriesSection(deliveries) {
  const list = el("ul", { id: "deliveries", class: "deliveries" });
  for (const delivery of deliveries) {
    const where = delivery.kind === "slack"
      ? `Slack ($${delivery.target.url_env ?? "?"})` : `webhook ${delivery.target.url ?? "?"}`;
    const attempts = el("ol", { class: "attempts" });
    for (const attempt of delivery.history) {
      attempts.append(el("li", { dataset: { outcome: attempt.outcome } },
        `${attempt.outcome}${attempt.status_code ? ` (HTTP ${attempt.status_code})` : ""}`,
        attempt.error ? ` — ${attempt.error}` : "", ` · ${when(attempt.started_at)}`));
    }
    list.append(el("li", { dataset: { delivery: delivery.delivery_id } },
      el("strong", {}, where), " ", badge("delivery", delivery.status),
      ` ${delivery.attempts}/${delivery.max_attempts} attempts`,
      delivery.last_error ? el("p", { class: "error" }, delivery.last_error) : "", attempts));
  }
  return section("Notifications", list);
}

export function originMark() {
  return el("span", { class: "origin", title: "Another agent's answer, checked by Verity" },
    "imported");
}

function setStatus(parts, record) {
  parts.status.replaceChildren(badge("status", record.status));
  parts.verdict.replaceChildren(badge("verdict", record.verdict ?? "none"));
}

function addEvent(list, event) {
  let item = list.querySelector(`li[data-node="${CSS.escape(event.node)}"]`);
  if (!item) {
    item = el("li", { class: "node", dataset: { node: event.node } },
      el("span", { class: "node-name" }, event.node), el("span", { class: "node-kind" }),
      el("ul", { class: "node-events" }));
    list.append(item);
  }
  item.dataset.state = event.kind;
  item.querySelector(".node-kind").textContent = event.kind;
  item.querySelector(".node-events").append(el("li", { dataset: { seq: event.seq } },
    el("span", { class: "seq" }, `#${event.seq}`), " ", event.kind, " ",
    el("span", { class: "brief" }, brief(event.payload))));
}

function brief(payload) {
  const parts = [];
  for (const [key, value] of Object.entries(payload ?? {})) {
    if (value === null || value === "" || (Array.isArray(value) && !value.length)) continue;
    const shown = Array.isArray(value) ? value.join(", ")
      : typeof value === "object" ? JSON.stringify(value) : String(value);
    parts.push(`${key}=${shown}`);
  }
  const text = parts.join(" · ");
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

// -- the outcome ------------------------------------------------------------------------------

function renderResult(root, record, bundle) {
  clear(root);
  const evaluation = record.self_evaluation?.verifier_evaluation ?? null;
  root.append(answerSection(record, evaluation));
  if (!evaluation && !bundle) return;
  root.append(claimsSection(evaluation, bundle), gatekeeperSection(evaluation?.gatekeeper_result),
    gapsSection(evaluation?.evidence_gaps ?? []));
}

function answerSection(record, evaluation) {
  const answer = record.final_answer;
  const body = el("div", { id: "answer", class: "answer" });
  body.append(el("p", { class: "meta" }, badge("verdict", record.verdict ?? "none"),
    record.fallback_type ? [" fallback ", badge("fallback", record.fallback_type)] : null,
    evaluation?.groundedness_score != null
      ? ` · groundedness ${evaluation.groundedness_score}` : null,
    ` · finished ${when(record.finished_at)}`,
    record.trace_url ? [" · ", el("a", { href: record.trace_url, class: "trace",
      rel: "noopener" }, "trace")] : null));
  if (!answer) {
    body.append(el("p", { class: "empty" }, `No answer released (${label(record.status)}).`));
    return section("Answer", body);
  }
  body.append(el("p", { class: "summary" }, answer.answer_summary),
    el("div", { class: "prose" }, answer.user_facing_answer));
  if (answer.recommended_actions?.length) {
    body.append(el("h3", {}, "Recommended actions"),
      el("ul", {}, answer.recommended_actions.map((text) => el("li", {}, text))));
  }
  if (evaluation?.rationale) {
    body.append(el("p", { class: "rationale" }, "Verifier: ", evaluation.rationale));
  }
  return section("Answer", body);
}

function executorClaims(bundle, evaluation) {
  try {
    const output = JSON.parse(bundle?.executor_output_raw ?? "null");
    if (Array.isArray(output?.claims)) return output.claims;
  } catch {
    // an unparseable Executor output: show the verified projection's claims instead
  }
  return evaluation?.executor_structured_output?.claims ?? [];
}

function claimsSection(evaluation, bundle) {
  const checks = new Map((evaluation?.claim_checks ?? []).map((c) => [c.claim_id, c]));
  const checked = evaluation?.gatekeeper_result?.checked_bindings ?? [];
  const invocations = new Map((bundle?.invocations ?? []).map((i) => [i.tool_call_id, i]));
  const claims = executorClaims(bundle, evaluation);
  const evidence = el("aside", { id: "evidence", class: "evidence" },
    el("p", { class: "empty" }, "Click a claim to see the evidence it is bound to."));
  const list = el("ol", { id: "claims", class: "claims" });
  for (const claim of claims) {
    const check = checks.get(claim.claim_id);
    const audits = checked.filter((b) => b.claim_id === claim.claim_id);
    const item = el("li", { class: "claim", tabindex: "0", role: "button",
      dataset: { claim: claim.claim_id } },
    el("div", { class: "claim-tags" }, badge("verification", classOf(check, audits)),
      " ", label(claim.kind), claim.critical ? " · critical" : null,
      claim.status === "HYPOTHESIS" ? " · hypothesis" : null,
      el("span", { class: "claim-id" }, claim.claim_id)),
    el("p", { class: "claim-text" }, claim.text));
    const open = () => {
      for (const other of list.children) other.removeAttribute("aria-selected");
      item.setAttribute("aria-selected", "true");
      showEvidence(evidence, claim, check, audits, invocations);
    };
    item.addEventListener("click", open);
    item.addEventListener("keydown", (e) => (e.key === "Enter" || e.key === " ") && open());
    list.append(item);
  }
  if (!claims.length) list.append(el("li", { class: "empty" }, "The Executor stated no claim."));
  return section("Claims and their evidence", el("div", { class: "claims-layout" }, list, evidence));
}

function classOf(check, audits) {
  if (check) return check.verification;
  return audits.length && audits.every((b) => b.status === "fail") ? "withheld" : "not_verified";
}

function showEvidence(panel, claim, check, audits, invocations) {
  clear(panel);
  panel.append(el("h3", {}, `Evidence for ${claim.claim_id}`),
    el("p", { class: "claim-text" }, claim.text));
  if (check?.note) panel.append(el("p", { class: "meta" }, "Verifier: ", check.note));
  const bindings = claim.evidence_bindings ?? [];
  if (!bindings.length) panel.append(el("p", { class: "empty" }, "No evidence bound."));
  bindings.forEach((binding, index) => {
    const audit = audits.find((b) => b.index === index);
    panel.append(bindingCard(binding, audit, invocations.get(binding.invocation_id)));
  });
}

function bindingCard(binding, audit, invocation) {
  const status = audit?.status ?? "unchecked";
  const card = el("div", { class: "binding", dataset: { status } },
    el("p", { class: "binding-head" }, badge("binding", status), " ",
      el("strong", {}, binding.tool_name), " ", el("code", {}, binding.invocation_id),
      audit?.rule ? [" · ", el("code", {}, audit.rule), " ", audit.reason ?? ""] : null));
  if (!invocation) {
    card.append(el("p", { class: "empty" }, "The run has no tool call with this id."));
    return card;
  }
  card.append(queryList(invocation), el("p", { class: "path" }, "at ", el("code", {}, binding.path)));
  card.append(el("pre", { class: "excerpt" }, excerpt(invocation.projection, binding)));
  return card;
}

function queryList(invocation) {
  const scope = invocation.projection?.scope ?? {};
  const queries = invocation.projection?.queries ?? scope.queries ?? [];
  const rows = [
    ["tool call", `${invocation.tool_name}(${JSON.stringify(invocation.arguments ?? {})})`],
    ["evidence", label(invocation.evidence_status)],
    ["service", scope.service],
    ["window", scope.window ? `${scope.window.start} – ${scope.window.end}` : null],
    ["filter", scope.filter],
  ];
  if (invocation.projection?.truncated) rows.push(["truncated", "items or bytes were cut"]);
  const list = el("dl", { class: "query" });
  for (const [name, value] of rows) {
    if (value) list.append(el("dt", {}, name), el("dd", {}, value));
  }
  for (const query of queries) list.append(el("dt", {}, "query"), el("dd", {}, el("code", {}, query)));
  return list;
}

function excerpt(projection, binding) {
  let found;
  try {
    found = resolvePath(projection ?? {}, binding.path);
  } catch (error) {
    return [`(the path does not parse: ${error.message})`];
  }
  if (!found.found) return ["(the path does not resolve in the stored projection)"];
  let text = typeof found.value === "string" ? found.value : JSON.stringify(found.value, null, 2);
  if (text.length > EXCERPT_MAX) text = `${text.slice(0, EXCERPT_MAX)}…`;
  return marked(text, binding.matched_text);
}

function gatekeeperSection(result) {
  const body = el("div", { id: "gatekeeper" });
  if (!result) {
    body.append(el("p", { class: "empty" }, "The Gatekeeper did not run."));
    return section("Gatekeeper", body);
  }
  const failed = result.checked_bindings.filter((b) => b.status === "fail");
  body.append(el("p", { class: "meta" }, "severity ", badge("severity", result.severity),
    ` · ${result.checked_bindings.length} bindings checked, ${failed.length} failed`,
    result.failed_rules.length ? ` · failed rules: ${result.failed_rules.join(", ")}` : null));
  if (!failed.length) {
    body.append(el("p", { class: "empty" }, "Every binding passed."));
    return section("Gatekeeper", body);
  }
  const rows = failed.map((b) => el("tr", {}, el("td", {}, b.claim_id), el("td", {}, b.tool_name),
    el("td", {}, el("code", {}, b.path)), el("td", {}, el("code", {}, b.rule ?? "")),
    el("td", {}, b.reason ?? "")));
  body.append(el("table", { id: "failed-bindings" },
    el("thead", {}, el("tr", {}, ["claim", "tool", "path", "rule", "reason"].map(
      (h) => el("th", {}, h)))), el("tbody", {}, rows)));
  return section("Gatekeeper: failed bindings", body);
}

function gapsSection(gaps) {
  const list = el("ul", { id: "gaps" });
  for (const gap of gaps) {
    list.append(el("li", {}, gap.critical ? badge("critical", "critical") : null, " ",
      gap.description, gap.claim_id ? ` (claim ${gap.claim_id})` : null,
      gap.suggested_tool ? [" · try ", el("code", {}, gap.suggested_tool)] : null));
  }
  if (!gaps.length) list.append(el("li", { class: "empty" }, "None reported."));
  return section("Evidence gaps", list);
}
