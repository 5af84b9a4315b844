// The page: a token box, routes (#/ ask, #/runs, #/runs/ID, #/batches, #/batches/ID) and the
// home views. Run and batch views live in run.js and batch.js.

import { api, token } from "./api.js";
import { badge, clear, el, section, when } from "./dom.js";
import { showBatch } from "./batch.js";
import { originMark, showRun } from "./run.js";

const view = document.getElementById("view");
const notice = document.getElementById("notice");
let current = new AbortController();

function notify(message) {
  notice.textContent = message;
  notice.hidden = !message;
}

function takeTokenFromHash() {
  const found = /^#token=([^&]+)/.exec(location.hash);
  if (!found) return;
  token.set(decodeURIComponent(found[1]));
  document.getElementById("token").value = token.get();
  history.replaceState(null, "", `${location.pathname}#/`);
}

function setUpTokenBox() {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  input.value = token.get();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    route();
  });
}

async function route() {
  current.abort();
  current = new AbortController();
  const { signal } = current;
  clear(view);
  if (!token.get()) {
    notify("Paste an API token above (verity tokens create), or open the URL "
      + "`verity serve --embedded` printed.");
    document.getElementById("token").focus();
    return;
  }
  notify("");
  const [, kind, id] = location.hash.replace(/^#\/?/, "/").split("/").map(decodeURIComponent);
  try {
    if (kind === "runs" && id) await showRun(view, id, { signal, notify });
    else if (kind === "batches" && id) await showBatch(view, id, { signal });
    else if (kind === "runs") await showRuns(view, { signal });
    else if (kind === "batches") showBatches(view);
    else await showAsk(view, { signal });
  } catch (error) {
    if (!signal.aborted) notify(error.message);
  }
}

async function showAsk(root, { signal }) {
  const question = el("textarea", { id: "question", rows: "3", required: true, maxlength: "4000",
    placeholder: "Why is checkout-service returning 500s?" });
  const source = el("select", { id: "source", required: true });
  const form = el("form", { id: "ask-form", class: "ask" },
    el("label", { for: "question" }, "Question"), question,
    el("label", { for: "source" }, "Source"), source,
    el("button", { id: "ask", type: "submit" }, "Diagnose"));
  const recent = el("div", { id: "recent" });
  root.append(section("Ask", form), section("Recent runs", recent));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const created = await api("/runs", { method: "POST",
        body: { question: question.value.trim(), source: source.value } });
      location.hash = `#/runs/${encodeURIComponent(created.run_id)}`;
    } catch (error) {
      notify(error.message);
    }
  });
  const { sources } = await api("/sources", { signal });
  for (const found of sources) {
    source.append(el("option", { value: found.name, dataset: { question: found.question ?? "" } },
      found.title ? `${found.title} (${found.name})` : found.name));
  }
  const hint = () => { question.placeholder = source.selectedOptions[0]?.dataset.question || ""; };
  source.addEventListener("change", hint);
  hint();
  await runsTable(recent, { signal, limit: 10 });
}

async function showRuns(root, { signal }) {
  const body = el("div", { id: "recent" });
  root.append(section("Runs", body));
  await runsTable(body, { signal, limit: 25 });
}

async function runsTable(root, { signal, limit, cursor = null }) {
  const query = new URLSearchParams({ limit: String(limit) });
  if (cursor) query.set("cursor", cursor);
  const page = await api(`/runs?${query}`, { signal });
  let table = root.querySelector("table");
  if (!table) {
    table = el("table", { id: "runs" }, el("thead", {}, el("tr", {},
      ["created", "question", "status", "verdict"].map((h) => el("th", {}, h)))), el("tbody"));
    root.append(table);
  }
  const rows = page.runs.map((run) => el("tr", { dataset: { run: run.run_id } },
    el("td", {}, when(run.created_at)),
    el("td", {}, el("a", { href: `#/runs/${encodeURIComponent(run.run_id)}` }, run.query),
      run.source === "import" ? [" ", originMark()] : null),
    el("td", {}, badge("status", run.status)), el("td", {}, badge("verdict", run.verdict))));
  table.tBodies[0].append(...rows);
  root.querySelector(".more")?.remove();
  if (!page.runs.length && !cursor) root.append(el("p", { class: "empty" }, "No run yet."));
  if (page.next_cursor) {
    root.append(el("button", { class: "more", type: "button", onclick: () =>
      runsTable(root, { signal, limit, cursor: page.next_cursor }).catch((e) => notify(e.message)),
    }, "More"));
  }
}

function showBatches(root) {
  const id = el("input", { id: "batch-id", placeholder: "batch id", spellcheck: "false" });
  const open = el("form", { id: "open-batch", class: "inline" }, id,
    el("button", { type: "submit" }, "Open report"));
  open.addEventListener("submit", (event) => {
    event.preventDefault();
    if (id.value.trim()) location.hash = `#/batches/${encodeURIComponent(id.value.trim())}`;
  });
  const start = el("button", { id: "reverify", type: "button" }, "Re-verify every ended run");
  start.addEventListener("click", async () => {
    try {
      const batch = await api("/batches", { method: "POST", body: { selection: {} } });
      location.hash = `#/batches/${encodeURIComponent(batch.batch_id)}`;
    } catch (error) {
      notify(error.message);
    }
  });
  root.append(section("Re-verify", el("p", {}, "Judge stored runs again with today's prompts "
    + "and rules; the report shows how verdicts moved."), start),
  section("Open a batch report", open));
}

takeTokenFromHash();
setUpTokenBox();
window.addEventListener("hashchange", () => { takeTokenFromHash(); route(); });
route();
