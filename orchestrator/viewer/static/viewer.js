// trialbox view: the run page's matrix, table, filters and live progress.
// Every value from a trial is put on the page as text (textContent, setAttribute): never as HTML.
// The one HTML inserted is the figures fragment, made and escaped by trialbox's own report code.
"use strict";

const LETTER = {accepted: "A", rejected: "R", agent_timeout: "T", budget_exhausted: "B",
                agent_resource_exhausted: "M", sandbox_broken_by_agent: "S", infra_error: "I"};
const SHOWN_ROWS = 500;   // table rows drawn at once; the filters narrow the rest
const POLL_MS = 2000;

const state = {rows: new Map(), last: 0, sort: {key: "task", dir: 1}, progress: null, figuresAt: -1};
window.__viewer = {errors: [], polls: 0};
window.addEventListener("error", e => window.__viewer.errors.push(String(e.message)));

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  for (const c of children) {
    node.append(c instanceof Node ? c : document.createTextNode(c === undefined || c === null ? "" : String(c)));
  }
  return node;
}

function runName() { return document.body.dataset.run; }
function runBase() { return "/runs/" + encodeURIComponent(runName()); }
function trialUrl(id) { return runBase() + "/trial?id=" + encodeURIComponent(id); }
function money(x) { return x === null || x === undefined ? "–" : "$" + Number(x).toFixed(4); }

function filters() {
  const f = {};
  for (const name of ["outcome", "failed", "task", "candidate", "stop", "kind", "flag"]) {
    f[name] = document.getElementById("f-" + name).value;
  }
  return f;
}

function matches(r, f) {
  return (!f.outcome || r.outcome === f.outcome) && (!f.failed || r.failed.includes(f.failed))
    && (!f.task || r.task === f.task) && (!f.candidate || r.candidate === f.candidate)
    && (!f.stop || (r.stop || "") === f.stop) && (!f.kind || (r.group === "infra" && (r.kind || "") === f.kind))
    && (!f.flag || r.flags.includes(f.flag));
}

function fillOptions() {
  const sets = {outcome: new Set(), failed: new Set(), task: new Set(), candidate: new Set(), stop: new Set(),
                kind: new Set(), flag: new Set()};
  for (const r of state.rows.values()) {
    sets.outcome.add(r.outcome); sets.task.add(r.task); sets.candidate.add(r.candidate);
    if (r.stop) sets.stop.add(r.stop);
    if (r.group === "infra" && r.kind) sets.kind.add(r.kind);
    r.failed.forEach(x => sets.failed.add(x)); r.flags.forEach(x => sets.flag.add(x));
  }
  for (const [name, values] of Object.entries(sets)) {
    const select = document.getElementById("f-" + name);
    const have = new Set([...select.options].map(o => o.value));
    for (const v of [...values].sort()) {
      if (!have.has(v)) select.append(el("option", {value: v}, v));
    }
  }
}

function cell(r) {
  const a = el("a", {href: trialUrl(r.id), class: "cell " + r.group, "data-outcome": r.outcome,
                     title: r.id + ": " + r.outcome + (r.reasons.length ? " (" + r.reasons.join(", ") + ")" : "")},
               LETTER[r.outcome] || "?");
  return a;
}

function drawMatrix(shown) {
  const table = document.getElementById("matrix");
  const candidates = [...new Set([...state.rows.values()].map(r => r.candidate))].sort();
  const byTask = new Map();
  for (const r of shown) {
    if (!byTask.has(r.task)) byTask.set(r.task, new Map());
    const m = byTask.get(r.task);
    if (!m.has(r.candidate)) m.set(r.candidate, []);
    m.get(r.candidate).push(r);
  }
  const head = el("tr", {}, el("th", {}, "task"), ...candidates.map(c => el("th", {}, c)));
  table.tHead.replaceChildren(head);
  const body = document.createDocumentFragment();
  for (const task of [...byTask.keys()].sort()) {
    const m = byTask.get(task);
    const link = el("a", {href: runBase() + "/compare?task=" + encodeURIComponent(task)}, task);
    const tr = el("tr", {"data-task": task}, el("td", {}, link));
    for (const c of candidates) {
      const cells = (m.get(c) || []).sort((x, y) => x.replicate - y.replicate).map(cell);
      const n = (m.get(c) || []).filter(r => r.outcome === "accepted").length;
      const td = el("td", {}, ...cells);
      if (cells.length) td.append(el("span", {class: "muted count"}, " " + n + "/" + cells.length));
      tr.append(td);
    }
    body.append(tr);
  }
  table.tBodies[0].replaceChildren(body);
}

function sortKey(r, key) {
  const v = r[key];
  return Array.isArray(v) ? v.join(",") : v === null || v === undefined ? "" : v;
}

function drawTable(shown) {
  const {key, dir} = state.sort;
  const rows = [...shown].sort((x, y) => {
    const a = sortKey(x, key), b = sortKey(y, key);
    if (a < b) return -dir;
    if (a > b) return dir;
    return x.id < y.id ? -1 : x.id > y.id ? 1 : 0;
  });
  const body = document.createDocumentFragment();
  for (const r of rows.slice(0, SHOWN_ROWS)) {
    body.append(el("tr", {"data-id": r.id, class: r.group},
      el("td", {}, el("a", {href: trialUrl(r.id)}, r.task)), el("td", {}, r.candidate), el("td", {}, r.replicate),
      el("td", {class: "outcome"}, r.outcome + (r.group === "infra" && r.kind ? " (" + r.kind + ")" : "")),
      el("td", {}, r.failed.join(", ")), el("td", {}, r.stop || ""), el("td", {}, money(r.cost)),
      el("td", {}, r.duration === null ? "" : Number(r.duration).toFixed(1)), el("td", {}, r.flags.join(", "))));
  }
  document.querySelector("#trials tbody").replaceChildren(body);
  document.getElementById("more").textContent = rows.length > SHOWN_ROWS
    ? (rows.length - SHOWN_ROWS) + " more trial(s) not drawn: narrow the filters or sort" : "";
  for (const th of document.querySelectorAll("#trials th")) {
    th.classList.toggle("sorted", th.dataset.key === key);
    th.dataset.dir = th.dataset.key === key ? (dir > 0 ? "asc" : "desc") : "";
  }
}

function draw() {
  const f = filters();
  const shown = [...state.rows.values()].filter(r => matches(r, f));
  document.getElementById("f-count").textContent = shown.length + " of " + state.rows.size + " trials";
  drawMatrix(shown);
  drawTable(shown);
  if (!window.__viewer.drawnAt && state.rows.size) window.__viewer.drawnAt = performance.now();
}

async function fetchRows() {
  const answer = await fetch("/api/runs/" + encodeURIComponent(runName()) + "/rows?after=" + state.last);
  if (!answer.ok) return;
  const got = await answer.json();
  for (const r of got.rows) state.rows.set(r.id, r);
  state.last = Math.max(state.last, got.last);
  if (got.rows.length) { fillOptions(); draw(); }
}

async function fetchFigures() {
  const answer = await fetch(runBase() + "/figures");
  const box = document.getElementById("figures");
  if (answer.status === 202) {
    if (!box.dataset.ready) box.replaceChildren(el("p", {class: "muted"}, "computing the figures…"));
    setTimeout(fetchFigures, POLL_MS);
    return;
  }
  box.innerHTML = await answer.text();  // trialbox's report fragment: every trial string in it escaped
  box.dataset.ready = "1";
  if (answer.headers.get("X-Figures") === "computing") setTimeout(fetchFigures, POLL_MS);
}

function setText(id, value) { document.getElementById(id).textContent = String(value); }

async function poll() {
  window.__viewer.polls += 1;
  let p;
  try {
    const answer = await fetch("/api/runs/" + encodeURIComponent(runName()) + "/progress");
    p = await answer.json();
  } catch (e) {
    setTimeout(poll, POLL_MS * 5);
    return;
  }
  setText("p-done", p.done); setText("p-planned", p.planned); setText("p-running", p.running);
  setText("p-left", p.left); setText("p-accepted", p.accepted); setText("p-rejected", p.rejected);
  setText("p-infra", p.infra); setText("p-cost", money(p.cost_usd));
  setText("p-eta", p.eta_s === null ? "–" : Math.round(p.eta_s) + " s");
  setText("p-live", p.live ? "live" : "");
  if (p.last_rowid > state.last) {
    await fetchRows();
    if (Date.now() - state.figuresAt > 30000) { state.figuresAt = Date.now(); fetchFigures(); }
  }
  const waiting = p.left > 0;
  setTimeout(poll, waiting ? POLL_MS : POLL_MS * 5);
}

function runPage() {
  for (const s of document.querySelectorAll("#filters select")) s.addEventListener("change", draw);
  for (const th of document.querySelectorAll("#trials th")) {
    th.addEventListener("click", () => {
      const key = th.dataset.key;
      state.sort = {key, dir: state.sort.key === key ? -state.sort.dir : 1};
      draw();
    });
  }
  const q = new URLSearchParams(location.search);
  fetchRows().then(() => {
    for (const [k, v] of q.entries()) {
      const s = document.getElementById("f-" + k);
      if (s && [...s.options].some(o => o.value === v)) s.value = v;
    }
    draw();
    state.figuresAt = Date.now();
    fetchFigures();
    setTimeout(poll, POLL_MS);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "run") runPage();
});
