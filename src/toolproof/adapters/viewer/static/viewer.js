// toolproof run viewer: plain JavaScript over the runs HTTP API (/v1). No build step, no CDN.
// Every piece of run data is untrusted: it is put into the page as text, never as HTML.
"use strict";

const TOKEN_KEY = "toolproof-token";
if (location.hash.startsWith("#token=")) {
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname + "#/");
}

// Bidirectional controls (and the invisible marks) reorder or hide what is shown: a
// "\u202Eevil\u202C" in a run reads as "live". Each one is kept as it is (the text of the
// page is the run's exact text) inside a span that isolates it and shows its code point
// (viewer.css: .ctl::before).
const CONTROLS = /([\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF])/;
function textNodes(text) {
  const nodes = [];
  for (const piece of String(text).split(CONTROLS)) {
    if (!piece) continue;
    if (piece.length === 1 && CONTROLS.test(piece)) {
      const cp = "U+" + piece.codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      const span = document.createElement("span");
      span.className = "ctl";
      span.dataset.cp = cp;
      span.title = cp + ": an invisible or bidirectional control character";
      span.append(document.createTextNode(piece));
      nodes.push(span);
    } else nodes.push(document.createTextNode(piece));
  }
  return nodes;
}

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "onclick" || key === "oninput") el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    if (child instanceof Node) el.append(child);
    else el.append(...textNodes(child));
  }
  return el;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch("/v1" + path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).message || message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}
const getJSON = async (path) => (await api(path)).json();
const bytesOf = async (runId, rel) =>
  new Uint8Array(await (await api(`/runs/${runId}/files/${rel}`)).arrayBuffer());

const utf8 = new TextDecoder("utf-8", { fatal: true });
function decode(bytes) { try { return utf8.decode(bytes); } catch (e) { return null; } }
function short(value, limit = 160) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length <= limit ? text : text.slice(0, limit - 1) + "…";
}
function evidencePath(evidenceId) { return "evidence/" + evidenceId.replace(/^evidence_/, ""); }

// ---------------------------------------------------------------- verdicts
const verdicts = new Map();
function verify(runId) {
  if (!verdicts.has(runId)) {
    verdicts.set(runId, api(`/runs/${runId}/verify`, { method: "POST" }).then((r) => r.json()));
  }
  return verdicts.get(runId);
}
function verdictBox(answer, policy) {
  if (answer === undefined) return h("div", { class: "verdict pending", "data-verdict": "pending" }, "verifying… (nothing here is verified until this says so)");
  if (answer.ok) {
    return h("div", { class: "verdict passed", "data-verdict": "passed" },
      `verified: passes verification (${policy} policy); manifest, hash chain and every cited byte checked now`);
  }
  return h("div", { class: "verdict failed", "data-verdict": "failed" },
    `FAILS VERIFICATION (${policy} policy): ${answer.failures.length} failing finding${answer.failures.length === 1 ? "" : "s"}`,
    h("ul", {}, answer.failures.map((f) => h("li", {}, `[${f.check}] ${f.file}: ${f.message}`))));
}

// ---------------------------------------------------------------- run list
async function listPage(app) {
  const runs = [];
  let cursor = null;
  do {
    const page = await getJSON("/runs?limit=1000" + (cursor ? "&cursor=" + cursor : ""));
    runs.push(...page.runs);
    cursor = page.next_cursor;
  } while (cursor && runs.length < 10000);
  runs.sort((a, b) => String(b.started_at || "").localeCompare(String(a.started_at || "")));
  const filter = h("input", { class: "filter", placeholder: "filter: id, task, outcome, verdict…", id: "filter" });
  const body = h("tbody");
  const compare = h("button", { id: "compare", disabled: true }, "compare the two selected runs");
  const selected = [];
  const rows = runs.map((run) => {
    const verdictCell = h("td", { class: "verdict-cell muted" }, "verifying…");
    const pick = h("input", { type: "checkbox", "aria-label": "select " + run.run_id });
    pick.onclick = () => {
      const at = selected.indexOf(run.run_id);
      if (pick.checked && at < 0) selected.push(run.run_id);
      if (!pick.checked && at >= 0) selected.splice(at, 1);
      compare.disabled = selected.length !== 2;
    };
    const row = h("tr", { "data-run": run.run_id },
      h("td", {}, pick),
      h("td", {}, h("a", { href: `#/run/${run.run_id}`, class: "mono run-link" }, run.run_id.slice(0, 16) + "…")),
      h("td", {}, run.task || h("span", { class: "muted" }, "(no readable spec)")),
      h("td", {}, run.started_at || ""),
      h("td", {}, run.outcome || "?"),
      verdictCell,
      h("td", {}, run.claims ?? "?"),
      h("td", {}, run.tool_calls ?? "?"));
    row.dataset.text = [run.run_id, run.task, run.outcome].join(" ").toLowerCase();
    return { run, row, verdictCell };
  });
  compare.onclick = () => { location.hash = `#/compare/${selected[0]}/${selected[1]}`; };
  filter.oninput = () => {
    const needle = filter.value.toLowerCase();
    for (const { row } of rows) row.hidden = needle && !row.dataset.text.includes(needle);
  };
  body.append(...rows.map((r) => r.row));
  app.replaceChildren(
    h("h1", {}, `runs (${runs.length})`), filter, " ", compare,
    h("table", { id: "runs" },
      h("thead", {}, h("tr", {}, ["", "id", "task", "started", "outcome", "verdict", "claims", "calls"].map((t) => h("th", {}, t)))),
      body));
  app.dataset.ready = "list";
  // verify a few at a time, newest first
  let next = 0;
  const worker = async () => {
    while (next < rows.length) {
      const item = rows[next++];
      try {
        const answer = await verify(item.run.run_id);
        item.verdictCell.textContent = answer.ok ? "verified" : `fails (${answer.failures.length})`;
        item.verdictCell.className = "verdict-cell " + (answer.ok ? "ok" : "bad");
      } catch (error) { item.verdictCell.replaceChildren(...textNodes("error: " + error.message)); }
      item.row.dataset.text += " " + item.verdictCell.textContent.toLowerCase();
    }
  };
  await Promise.all([worker(), worker()]);
}

// ---------------------------------------------------------------- a run
function failingFiles(answer) {
  return answer && !answer.ok ? new Set(answer.failures.map((f) => f.file)) : new Set();
}

function describeEvent(event) {
  switch (event.type) {
    case "tool_called": return `${event.call.tool}(${short(event.call.arguments, 200)})`;
    case "tool_returned": return event.result.ok ? "→ " + short(event.result.value, 200) : `✗ ${event.result.failure.kind}: ${short(event.result.failure.message, 200)}`;
    case "failure_observed": return `${event.failure.kind}: ${short(event.failure.message, 160)}${event.recovered_by ? " (recovered by " + event.recovered_by + ")" : ""}`;
    case "evidence_registered": return `${event.evidence.path} (${event.evidence.size} bytes, ${event.evidence.source.kind})`;
    case "claim_emitted": return `${event.claim.status}: ${short(event.claim.statement, 200)}`;
    case "step_started": return `${event.kind || ""}`;
    case "step_finished": return `${event.status}${event.detail && event.detail.reason ? ": " + short(event.detail.reason, 160) : ""}`;
    default: return short(Object.fromEntries(Object.entries(event).filter(([k]) => !["idx", "prev", "type", "step", "schema_version"].includes(k))), 200);
  }
}

async function timeline(runId, section, timings, failing) {
  const body = h("tbody");
  const table = h("table", { class: "timeline", id: "timeline" },
    h("thead", {}, h("tr", {}, ["#", "event", "step", "what", "duration"].map((t) => h("th", {}, t)))), body);
  // the next page's X-Next-Cursor ("" before the first page, null after the last): each
  // page is read from its own byte of trace.jsonl, however far into a big run it is
  const more = h("button", { id: "timeline-more", class: "muted" }, "…");
  section.append(failing.has("trace.jsonl") ? h("p", { class: "banner" }, "trace.jsonl fails verification: the events below are shown as stored, not as verified") : "", table, more);
  let cursor = "";
  let loading = false;
  const load = async () => {
    if (loading || cursor === null) return;
    loading = true;
    let response, text;
    try {
      response = await api(`/runs/${runId}/trace?limit=300` + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      text = await response.text();
    } catch (error) {
      more.replaceChildren(...textNodes("cannot read the next events: " + error.message + " (click to retry)"));
      loading = false;
      return;
    }
    const rows = [];
    for (const line of text.split("\n")) {
      if (!line) continue;
      let event;
      try { event = JSON.parse(line); } catch (e) { rows.push(h("tr", { class: "failed" }, h("td", {}, "?"), h("td", { colspan: 4 }, "unreadable event: " + short(line)))); continue; }
      const seconds = event.type === "step_finished" && timings && timings.steps ? timings.steps[event.step] : undefined;
      const failed = (event.type === "tool_returned" && !event.result.ok) || (event.type === "step_finished" && event.status !== "ok") || event.type === "failure_observed";
      rows.push(h("tr", { class: failed ? "failed" : "", "data-idx": event.idx },
        h("td", {}, event.idx), h("td", { class: "ev-type" }, event.type), h("td", {}, event.step || ""),
        h("td", { class: "mono" }, describeEvent(event)),
        h("td", {}, seconds === undefined ? "" : `${(seconds * 1000).toFixed(1)} ms`)));
    }
    body.append(...rows);
    cursor = response.headers.get("X-Next-Cursor");
    more.textContent = cursor === null ? `${body.children.length} events` : `${body.children.length} events shown; more load as you scroll (or click)`;
    more.disabled = cursor === null;
    loading = false;
  };
  more.onclick = load;
  await load();
  new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) load(); }).observe(more);
}

function highlighted(bytes, start, end, context) {
  const from = Math.max(0, start - context);
  const to = Math.min(bytes.length, end + context);
  const before = decode(bytes.slice(from, start));
  const middle = decode(bytes.slice(start, end));
  const after = decode(bytes.slice(end, to));
  if (before === null || middle === null || after === null) return null;
  return h("pre", { class: "snippet" }, from > 0 ? "…" : "", before,
    h("mark", { class: "cited", "data-start": start, "data-end": end }, middle), after, to < bytes.length ? "…" : "");
}

async function claimsSection(runId, claims, section, answer) {
  const failing = failingFiles(answer);
  if (!Array.isArray(claims)) { section.append(h("p", { class: "banner" }, "claims.json cannot be read")); return; }
  if (!claims.length) section.append(h("p", { class: "muted" }, "no claims"));
  for (const [index, claim] of claims.entries()) {
    const files = (claim.supports || []).map((s) => evidencePath(s.evidence));
    const bad = files.filter((f) => failing.has(f));
    // a packed run holds every item in evidence.pack, read through evidence.idx
    if (files.length) bad.push(...["evidence.pack", "evidence.idx"].filter((f) => failing.has(f)));
    if (failing.has("claims.json")) bad.push("claims.json");
    const verified = answer !== undefined && answer.ok;
    let status;
    if (claim.status === "validated" && verified) status = h("span", { class: "badge ok" }, "validated, verified");
    else if (claim.status === "validated") status = h("span", { class: "badge bad" }, answer === undefined ? "claimed validated: not yet verified" : "claimed validated: the run FAILS verification");
    else status = h("span", { class: "badge muted" }, claim.status);
    const box = h("div", { class: "claim" + (bad.length ? " failing" : ""), "data-claim": index },
      h("div", {}, h("strong", {}, `${index + 1}. `), claim.statement, " ", status, " ", h("span", { class: "muted" }, `(${claim.type}, ${claim.reasoner})`)),
      claim.reason ? h("div", { class: "muted" }, claim.reason) : "",
      bad.length ? h("div", { class: "depends" }, "depends on a file that fails verification: " + [...new Set(bad)].join(", ")) : "");
    for (const [s, support] of (claim.supports || []).entries()) {
      const rel = evidencePath(support.evidence);
      const link = h("a", { href: `#/evidence/${runId}/${rel}@${support.start}-${support.end}`, class: "mono evidence-link" }, `${rel} [${support.start}, ${support.end})`);
      const holder = h("div", { "data-support": s }, link);
      box.append(holder);
      bytesOf(runId, rel).then((bytes) => {
        const snippet = highlighted(bytes, support.start, support.end, 160);
        holder.append(snippet || h("div", { class: "muted" }, "binary evidence: open it to see the bytes"));
      }).catch((error) => holder.append(h("div", { class: "bad" }, "cannot read: " + error.message)));
    }
    section.append(box);
  }
}

function checksSection(report, section, answer, stored) {
  const shown = answer && answer.report ? answer.report : stored;
  section.append(answer && answer.report ? h("p", { class: "muted" }, "recomputed now by verify") : h("p", { class: "banner" }, "the checks could not be recomputed; the stored report is shown, not verified"));
  if (!shown) return;
  section.append(h("table", { id: "checks" },
    h("thead", {}, h("tr", {}, ["check", "invariant", "severity", "status", "findings"].map((t) => h("th", {}, t)))),
    h("tbody", {}, shown.results.map((r) => h("tr", { "data-check": r.check },
      h("td", {}, r.check), h("td", {}, r.invariant), h("td", {}, r.severity),
      h("td", { class: r.status === "failed" ? "bad" : r.status === "passed" ? "ok" : "muted" }, r.status),
      h("td", {}, r.findings.length ? h("ul", {}, r.findings.map((f) => h("li", {}, `${f.severity} ${f.file}: ${f.message}`))) : ""))))));
}

function descriptorSection(runtime, section, failing) {
  if (failing.has("runtime.json")) section.append(h("p", { class: "banner" }, "runtime.json fails verification: shown as stored"));
  if (!runtime) { section.append(h("p", { class: "muted" }, "runtime.json cannot be read")); return; }
  section.append(h("p", {}, `kind ${runtime.kind}, mode ${runtime.mode}, seed ${runtime.seed}; reasoner ${runtime.reasoner.name}/${runtime.reasoner.version}` +
    (runtime.reasoner.deterministic ? "" : ` (varies: ${runtime.reasoner.varies.join(", ")})`) + (runtime.lock ? `; lock ${runtime.lock}` : "")));
  section.append(h("table", { id: "tools" },
    h("thead", {}, h("tr", {}, ["tool", "version", "source", "stack", "fingerprint"].map((t) => h("th", {}, t)))),
    h("tbody", {}, (runtime.toolset.tools || []).map((t) => h("tr", {},
      h("td", {}, t.name), h("td", {}, t.version), h("td", {}, t.source || ""),
      h("td", {}, (t.stack || []).map((l) => l.name).join(" → ")), h("td", { class: "mono" }, short(t.fingerprint, 24)))))));
  const plugged = [...(runtime.providers || []), ...(runtime.checks || [])];
  if (plugged.length) {
    section.append(h("p", {}, "plugged in: " + plugged.map((p) => `${p.kind} ${p.name}/${p.version} (${p.origin})`).join("; ")));
  }
}

async function jsonFile(runId, rel) {
  try { return JSON.parse(decode(await bytesOf(runId, rel))); } catch (e) { return null; }
}

async function runPage(app, runId) {
  // Small files first (report, timings), then the first timeline page; verification
  // starts once the page is usable, so on a big run it does not hold the timeline back.
  // The task comes from the run's summary (spec.json restates every call of a recorded
  // session: 116 MB for a million calls), filled in when it answers.
  const [report, timings] = await Promise.all([jsonFile(runId, "report.json"), jsonFile(runId, "timings.json")]);
  const policy = report ? report.policy : "?";
  const task = h("p", { id: "task", class: "muted" }, "…");
  getJSON(`/runs/${runId}/summary`).then((summary) => {
    task.className = "";
    task.replaceChildren(...textNodes(summary.task === null ? "(spec.json cannot be read)" : summary.task),
      summary.tool_calls === null ? "" : h("span", { class: "muted" }, ` — ${summary.tool_calls} tool call${summary.tool_calls === 1 ? "" : "s"}`));
  }).catch((error) => task.replaceChildren(...textNodes("(summary: " + error.message + ")")));
  const head = h("div", { id: "verdict" }, verdictBox(undefined, policy));
  const sections = {};
  for (const name of ["timeline", "claims", "checks", "descriptor", "compare"]) sections[name] = h("section", { id: "section-" + name });
  const other = h("input", { class: "filter", placeholder: "another run id to compare with", id: "compare-with" });
  const go = h("button", { onclick: () => { location.hash = `#/compare/${runId}/${other.value.trim()}`; } }, "compare");
  sections.compare.append(other, " ", go);
  app.replaceChildren(
    h("h1", { class: "mono" }, runId), task, head,
    h("h2", {}, "timeline"), sections.timeline, h("h2", {}, "claims"), sections.claims,
    h("h2", {}, "checks"), sections.checks, h("h2", {}, "runtime descriptor"), sections.descriptor,
    h("h2", {}, "compare"), sections.compare);
  await timeline(runId, sections.timeline, timings, new Set());
  app.dataset.ready = "timeline";
  const [answer, claims, runtime] = await Promise.all([
    verify(runId), jsonFile(runId, "claims.json"), jsonFile(runId, "runtime.json")]);
  head.replaceChildren(verdictBox(answer, answer.report ? answer.report.policy : policy));
  const failing = failingFiles(answer);
  if (failing.has("trace.jsonl")) sections.timeline.prepend(h("p", { class: "banner" }, "trace.jsonl fails verification: the events below are shown as stored, not as verified"));
  await claimsSection(runId, claims, sections.claims, answer);
  checksSection(report, sections.checks, answer, report);
  descriptorSection(runtime, sections.descriptor, failing);
  app.dataset.ready = "run";
}

// ---------------------------------------------------------------- evidence bytes
function prettyJSON(text, charStart, charEnd) {
  // Re-indents canonical JSON by inserting whitespace between tokens only; the cited
  // characters are wrapped in marks, closed around every inserted character, so the
  // marks' text is exactly the cited bytes.
  const pre = h("pre", { class: "evidence", id: "evidence" });
  let depth = 0, inString = false, escaped = false, buffer = "", marked = false;
  const flush = () => {
    if (!buffer) return;
    pre.append(...(marked ? [h("mark", { class: "cited" }, buffer)] : textNodes(buffer)));
    buffer = "";
  };
  const insert = (ws) => { flush(); pre.append(document.createTextNode(ws)); };
  for (let i = 0; i < text.length; i++) {
    const inside = i >= charStart && i < charEnd;
    if (inside !== marked) { flush(); marked = inside; }
    const c = text[i];
    if (inString) {
      buffer += c;
      if (escaped) escaped = false; else if (c === "\\") escaped = true; else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') { inString = true; buffer += c; continue; }
    if (c === "}" || c === "]") {
      depth -= 1;
      if (text[i - 1] !== "{" && text[i - 1] !== "[") insert("\n" + "  ".repeat(Math.max(depth, 0)));
      if (inside !== marked) { flush(); marked = inside; }
      buffer += c;
      continue;
    }
    buffer += c;
    if (c === "{" || c === "[") { depth += 1; if (text[i + 1] !== "}" && text[i + 1] !== "]") insert("\n" + "  ".repeat(depth)); }
    else if (c === ",") insert("\n" + "  ".repeat(depth));
    else if (c === ":") insert(" ");
  }
  flush();
  return pre;
}

function hexDump(bytes, start, end) {
  const pre = h("pre", { class: "hex evidence", id: "evidence" });
  for (let row = 0; row < bytes.length; row += 16) {
    pre.append(row.toString(16).padStart(8, "0") + "  ");
    for (let i = row; i < Math.min(row + 16, bytes.length); i++) {
      const cell = bytes[i].toString(16).padStart(2, "0");
      pre.append(i >= start && i < end ? h("mark", { class: "cited", "data-byte": i }, cell) : cell, " ");
    }
    pre.append("\n");
  }
  return pre;
}

async function evidencePage(app, runId, rel, start, end) {
  const bytes = await bytesOf(runId, rel);
  const answer = await verify(runId);
  const failing = failingFiles(answer);
  const text = decode(bytes);
  let view;
  if (text === null) view = hexDump(bytes, start, end);
  else {
    const charStart = start === null ? -1 : decode(bytes.slice(0, start)).length;
    const charEnd = end === null ? -1 : charStart + decode(bytes.slice(start, end)).length;
    let json = false;
    try { JSON.parse(text); json = text.startsWith("{") || text.startsWith("["); } catch (e) { json = false; }
    if (json) view = prettyJSON(text, charStart, charEnd);
    else {
      view = h("pre", { class: "evidence", id: "evidence" });
      if (start === null) view.append(...textNodes(text));
      else view.append(...textNodes(text.slice(0, charStart)), h("mark", { class: "cited", "data-start": start, "data-end": end }, text.slice(charStart, charEnd)), ...textNodes(text.slice(charEnd)));
    }
  }
  app.replaceChildren(
    h("p", {}, h("a", { href: `#/run/${runId}` }, "← " + runId.slice(0, 16) + "…")),
    h("h1", { class: "mono" }, rel), verdictBox(answer, answer.report ? answer.report.policy : "?"),
    failing.has(rel) ? h("p", { class: "banner", id: "evidence-failing" }, `${rel} fails verification: these are its bytes as stored now, not the recorded ones`) : "",
    h("p", { class: "muted" }, `${bytes.length} bytes` + (start === null ? "" : `; cited [${start}, ${end})`) + (text === null ? "; binary, shown as hex" : "")),
    view);
  app.dataset.ready = "evidence";
}

// ---------------------------------------------------------------- compare
async function comparePage(app, a, b) {
  const diff = await getJSON(`/diff?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  const first = diff.first_event;
  app.replaceChildren(
    h("h1", {}, "compare"),
    h("p", { class: "mono" }, h("a", { href: `#/run/${a}` }, a), " vs ", h("a", { href: `#/run/${b}` }, b)),
    h("div", { class: "verdict " + (diff.identical ? "passed" : diff.explained ? "pending" : "failed"), id: "diff-verdict" },
      diff.identical ? "identical" : diff.explained ? "they differ where a declared non-deterministic source varies (variation, not corruption)" : "they differ"),
    h("h2", {}, "first divergent event"),
    first ? h("table", { id: "first-event" }, h("tbody", {},
      Object.entries(first).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { class: "mono" }, short(v, 400))))))
      : h("p", { class: "muted" }, "none: the traces are identical"),
    first ? h("div", { id: "first-events" }) : "",
    h("h2", {}, "files"),
    h("table", { id: "files" }, h("tbody", {}, Object.entries(diff.files).map(([f, s]) => h("tr", {}, h("td", { class: "mono" }, f), h("td", { class: s === "same" ? "ok" : "bad" }, s))))),
    Object.keys(diff.varying).length ? h("p", {}, "declared non-deterministic sources: " + Object.entries(diff.varying).map(([k, v]) => `${k} (varies: ${v.join(", ")})`).join("; ")) : "");
  if (first) {
    const holder = document.getElementById("first-events");
    for (const [label, runId] of [["a", a], ["b", b]]) {
      const text = await (await api(`/runs/${runId}/trace?start=${first.idx}&limit=1`)).text();
      holder.append(h("p", {}, h("strong", {}, `${label}: event ${first.idx} of ${runId.slice(0, 16)}…`)), h("pre", { class: "mono" }, text.trim() || "(no such event)"));
    }
  }
  app.dataset.ready = "compare";
}

// ---------------------------------------------------------------- routing
async function route() {
  const app = document.getElementById("app");
  delete app.dataset.ready;
  app.replaceChildren("loading…");
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  try {
    if (parts[0] === "run" && parts[1]) await runPage(app, parts[1]);
    else if (parts[0] === "evidence" && parts[1]) {
      const rest = parts.slice(2).join("/");
      const match = rest.match(/^(.*)@(\d+)-(\d+)$/);
      if (match) await evidencePage(app, parts[1], match[1], Number(match[2]), Number(match[3]));
      else await evidencePage(app, parts[1], rest, null, null);
    } else if (parts[0] === "compare" && parts[1] && parts[2]) await comparePage(app, parts[1], parts[2]);
    else await listPage(app);
  } catch (error) {
    app.replaceChildren(h("p", { class: "banner", id: "error" }, "error: " + error.message));
    app.dataset.ready = "error";
  }
}
window.addEventListener("hashchange", route);
route();
