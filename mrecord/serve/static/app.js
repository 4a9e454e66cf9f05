// mrecord dataset browser: plain JavaScript over the JSON API (docs/SERVE.md).
"use strict";

const PAGE = 25;
const state = { name: null, info: null, start: 0, search: null, token: sessionStorage.getItem("mrecord-token") || "" };

// -- small helpers ------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElementNS(tag.startsWith("svg:") ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag.replace("svg:", ""));
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") el.addEventListener("click", v);
    else if (v !== null && v !== undefined) el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const $ = (id) => document.getElementById(id);
const fmtInt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
function fmtNum(x) {
  if (x === null || x === undefined) return "–";
  if (Number.isInteger(x)) return fmtInt(x);
  return Math.abs(x) >= 1e5 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : x.toFixed(4);
}
// Binary units, as the CLI prints them (mrecord/cli/_format.py): 812 B, 1.5 KiB, 30.4 MiB.
function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
}
// A float at the precision its type holds (float32: 7 significant digits, not 17).
const DIGITS = { float16: 4, float32: 7, float64: 15 };
function fmtFloat(x, dtype) {
  if (typeof x !== "number" || Number.isInteger(x) || !(dtype in DIGITS)) return x;
  return Number(x.toPrecision(DIGITS[dtype]));
}
function fieldType(column) {
  const f = state.info && state.info.schema.find((x) => x.name === column);
  return f ? f.type : "";
}
// What columns mean: the description's "features" (docs/FORMAT.md, "Column features").
function features(desc) {
  try {
    const d = JSON.parse(desc || "");
    return d && typeof d === "object" && d.features && typeof d.features === "object" ? d.features : {};
  } catch (e) { return {}; }
}
function className(column, value) {
  const names = state.info && state.info.features[column] && state.info.features[column].class_names;
  return Array.isArray(names) && Number.isInteger(value) && value >= 0 && value < names.length ? names[value] : null;
}
// The subtitle: a JSON description shown as its text ("description") or its short
// top-level values (source, split, ...), never as raw JSON.
function subtitle(desc) {
  if (!desc) return "";
  let d;
  try { d = JSON.parse(desc); } catch (e) { return desc.length > 300 ? desc.slice(0, 300) + "…" : desc; }
  if (!d || typeof d !== "object" || Array.isArray(d)) return String(d);
  if (typeof d.description === "string" && d.description) return d.description;
  return Object.entries(d)
    .filter(([k, v]) => k !== "features" && (typeof v === "string" || typeof v === "number"))
    .map(([k, v]) => `${k}: ${v}`).join(" · ");
}
function toast(msg) {
  const t = $("toast");
  t.textContent = msg;
  t.classList.remove("hidden");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.add("hidden"), 6000);
}

async function api(path) {
  const headers = state.token ? { Authorization: "Bearer " + state.token } : {};
  const r = await fetch(path, { headers });
  if (r.status === 401) {
    $("token-form").classList.remove("hidden");
    throw new Error("this server needs a token: enter it at the top right");
  }
  const body = await r.json();
  if (!r.ok) throw new Error(body.error ? `${body.error.code}: ${body.error.message}` : r.statusText);
  return body;
}
const dsPath = (suffix) => `/api/datasets/${encodeURIComponent(state.name)}${suffix || ""}`;

function thumb(id, column, size, cls) {
  const url = dsPath(`/rows/${id}/${encodeURIComponent(column)}.png?size=${size}`);
  const img = h("img", { class: cls, alt: `${column} of row ${id}`, loading: "lazy" });
  if (!state.token) img.src = url;
  else fetch(url, { headers: { Authorization: "Bearer " + state.token } })
    .then((r) => r.blob()).then((b) => { img.src = URL.createObjectURL(b); });
  return img;
}

// -- value rendering ---------------------------------------------------------------------------

function cell(value, column, id) {
  if (state.info.image_columns.includes(column)) return thumb(id, column, 96, "thumb");
  if (value === null) return h("span", { class: "muted" }, "null");
  if (typeof value === "object" && "bytes" in value) return h("span", { class: "val-bytes" }, fmtBytes(value.bytes));
  if (typeof value === "object" && "base64" in value) return h("span", { class: "val-bytes" }, fmtBytes(atob(value.base64).length));
  if (typeof value === "object" && "dtype" in value) {
    const shown = (value.head || (value.data || []).flat(Infinity).slice(0, 8));
    const size = value.shape.reduce((a, b) => a * b, 1);
    const more = size > shown.length ? "…" : "";  // a short array is shown whole
    const head = shown.map((x) => fmtNum(fmtFloat(x, value.dtype))).join(", ");
    return h("span", { class: "val-array mono" }, `${value.dtype}[${value.shape.join("×")}] `, h("span", { class: "muted" }, `[${head}${more}]`));
  }
  if (typeof value === "number") {
    const name = className(column, value);
    return h("span", { class: "mono" }, fmtNum(value), name === null ? null : h("span", { class: "muted" }, ` ${name}`));
  }
  return String(value);
}

// -- the dataset list --------------------------------------------------------------------------

async function loadDatasets() {
  const list = $("datasets");
  try {
    const { datasets } = await api("/api/datasets");
    list.replaceChildren(...datasets.map((d) =>
      h("li", { class: "ds-item", "data-name": d.name, onclick: () => openDataset(d.name) },
        h("div", { class: "name" }, d.name),
        h("div", { class: "meta" }, `${fmtInt(d.rows)} rows · ${d.shards} shard${d.shards === 1 ? "" : "s"} · ${fmtBytes(d.bytes)}`))));
    const wanted = decodeURIComponent(location.hash.slice(1));
    const first = datasets.find((d) => d.name === wanted) || datasets[0];
    if (first) openDataset(first.name);
  } catch (e) {
    list.replaceChildren(h("li", { class: "muted" }, e.message));
  }
}

async function openDataset(name) {
  state.name = name;
  state.start = 0;
  state.search = null;
  location.hash = encodeURIComponent(name);
  for (const li of document.querySelectorAll(".ds-item")) li.classList.toggle("active", li.dataset.name === name);
  $("empty").classList.add("hidden");
  $("dataset").classList.remove("hidden");
  $("ds-title").textContent = name;
  $("histogram").replaceChildren(h("p", { class: "muted" }, "computing statistics…"));
  $("stats-table").replaceChildren();
  try {
    state.info = await api(dsPath() + "?verify=1");
  } catch (e) { toast(e.message); return; }
  state.info.features = features(state.info.desc);
  renderInfo(state.info);
  loadRows();
  loadStats();
}

function renderInfo(info) {
  $("ds-desc").textContent = subtitle(info.desc);
  $("ds-desc").title = info.desc || "";
  const cards = [
    ["rows", fmtInt(info.rows)], ["shards", info.shards], ["pages", fmtInt(info.pages)],
    ["on disk", fmtBytes(info.bytes)], ["columns", info.schema.length],
    ["indexed", info.index_fields.join(", ") || "–"],
  ];
  $("cards").replaceChildren(...cards.map(([k, v]) => h("div", { class: "card" }, h("div", { class: "v" }, v), h("div", { class: "k" }, k))));
  $("schema-table").replaceChildren(
    h("thead", {}, h("tr", {}, h("th", {}, "field"), h("th", {}, "type"), h("th", {}, "shape"), h("th", {}, "compression"), h("th", { class: "num" }, "stored"), h("th", { class: "num" }, "raw"))),
    h("tbody", {}, info.schema.map((f) => h("tr", {},
      h("td", {}, h("b", {}, f.name), " ", info.index_fields.includes(f.name) ? h("span", { class: "pill" }, "index") : null,
        info.image_columns.includes(f.name) ? h("span", { class: "pill" }, "image") : null),
      h("td", { class: "mono" }, f.type), h("td", { class: "mono" }, f.shape ? `[${f.shape.join(", ")}]` : "–"),
      h("td", {}, f.compression), h("td", { class: "num" }, fmtBytes(f.stored_bytes)), h("td", { class: "num" }, fmtBytes(f.raw_bytes))))));
  $("shard-table").replaceChildren(
    h("thead", {}, h("tr", {}, h("th", {}, "file"), h("th", { class: "num" }, "rows"), h("th", { class: "num" }, "pages"), h("th", { class: "num" }, "bytes"), h("th", { class: "num" }, ".db"))),
    h("tbody", {}, info.files.map((f) => h("tr", {}, h("td", { class: "mono" }, f.file), h("td", { class: "num" }, fmtInt(f.rows)),
      h("td", { class: "num" }, fmtInt(f.pages)), h("td", { class: "num" }, fmtBytes(f.bytes)), h("td", { class: "num" }, fmtBytes(f.db_bytes))))));
  showVerify(info.verify);
  const sel = $("search-field");
  sel.replaceChildren(...info.index_fields.map((f) => h("option", { value: f }, f)));
  $("search-form").classList.toggle("hidden", info.index_fields.length === 0);
}

function showVerify(v) {
  const verify = $("verify");
  if (v.state !== "done") {
    verify.className = "verify muted";
    verify.textContent = "verifying every page checksum…";
    const name = state.name;
    setTimeout(() => { if (name === state.name) api(dsPath() + "?verify=1").then((i) => { if (name === state.name) showVerify(i.verify); }).catch(() => {}); }, 1000);
    return;
  }
  verify.className = "verify " + (v.ok ? "ok" : "bad");
  verify.textContent = v.ok ? `✓ verified: ${fmtInt(v.pages_checked)} pages, every checksum matches`
    : `✗ damaged: ${v.problems.length} problem(s): ${v.problems.slice(0, 3).join("; ")}`;
}

// -- statistics and the histogram ---------------------------------------------------------------

async function loadStats() {
  const name = state.name;
  let stats;
  try { stats = await api(dsPath("/stats")); } catch (e) { toast(e.message); return; }
  if (name !== state.name) return;
  const rows = Object.entries(stats.fields).map(([col, s]) => h("tr", {},
    h("td", {}, h("b", {}, col)), h("td", { class: "mono" }, s.type), h("td", { class: "num" }, fmtInt(s.count)),
    h("td", { class: "num" }, fmtNum(s.min)), h("td", { class: "num" }, fmtNum(s.max)), h("td", { class: "num" }, fmtNum(s.mean)),
    h("td", { class: "num" }, s.length ? `${s.length.p50.toFixed(0)} / ${s.length.p99.toFixed(0)}` : "–")));
  $("stats-table").replaceChildren(
    h("thead", {}, h("tr", {}, h("th", {}, "field"), h("th", {}, "type"), h("th", { class: "num" }, "count"), h("th", { class: "num" }, "min"),
      h("th", { class: "num" }, "max"), h("th", { class: "num" }, "mean"), h("th", { class: "num" }, "length p50/p99"))),
    h("tbody", {}, rows));
  const labelled = Object.entries(stats.fields).find(([, s]) => s.histogram);
  if (!labelled) {
    $("histogram").replaceChildren(h("p", { class: "muted" }, "no integer label field to histogram"));
    return;
  }
  $("hist-title").textContent = `Histogram of ${labelled[0]}`;
  $("histogram").replaceChildren(histogram(labelled[0], labelled[1].histogram));
}

function histogram(field, hist) {
  const entries = Object.entries(hist).map(([k, v]) => [Number(k), v]).sort((a, b) => a[0] - b[0]);
  const W = 560, H = 220, L = 44, B = 28, T = 10, R = 8;
  const top = Math.max(...entries.map((e) => e[1]), 1);
  // a round tick step (1, 2 or 5 times a power of ten) giving about four grid lines
  const raw = top / 4, mag = 10 ** Math.floor(Math.log10(raw));
  const tick = Math.max(1, [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw));
  const max = Math.ceil(top / tick) * tick;
  const bw = (W - L - R) / entries.length;
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `histogram of ${field}` });
  for (let v = 0; v <= max; v += tick) {
    const y = T + (H - T - B) * (1 - v / max);
    svg.append(h("svg:line", { x1: L, x2: W - R, y1: y, y2: y, class: "axis", "stroke-dasharray": v ? "2 3" : null }));
    svg.append(h("svg:text", { x: L - 6, y: y + 3, "text-anchor": "end" }, fmtInt(v)));
  }
  const searchable = state.info.index_fields.includes(field);
  const step = Math.max(1, Math.ceil(entries.length / 20));
  entries.forEach(([k, v], i) => {
    const bh = ((H - T - B) * v) / max;
    const bar = h("svg:rect", { class: "bar", x: L + i * bw + bw * 0.12, y: H - B - bh, width: Math.max(1, bw * 0.76), height: bh, rx: Math.min(3, bw / 4), "data-value": k },
      h("svg:title", {}, `${field} = ${k}${className(field, k) === null ? "" : ` (${className(field, k)})`}: ${fmtInt(v)} rows${searchable ? " (click to search)" : ""}`));
    if (searchable) bar.addEventListener("click", () => { $("search-field").value = field; $("search-value").value = k; runSearch(); });
    svg.append(bar);
    if (i % step === 0) svg.append(h("svg:text", { x: L + i * bw + bw / 2, y: H - B + 14, "text-anchor": "middle", class: "tick" }, className(field, k) ?? k));
  });
  return svg;
}

// -- rows: pages and search ---------------------------------------------------------------------

async function loadRows() {
  const name = state.name;
  let page;
  try {
    if (state.search) {
      const s = state.search;
      page = await api(dsPath(`/search?field=${encodeURIComponent(s.field)}&value=${encodeURIComponent(s.value)}&page=${s.page}&num_row=${PAGE}&view=summary`));
    } else {
      page = await api(dsPath(`/rows?start=${state.start}&stop=${state.start + PAGE}&view=summary`));
    }
  } catch (e) { toast(e.message); return; }
  if (name !== state.name) return;
  renderRows(page);
}

function renderRows(page) {
  const cols = page.columns;
  $("rows-table").replaceChildren(
    h("thead", {}, h("tr", {}, h("th", { class: "num" }, "id"), cols.map((c) => h("th", {}, c)))),
    h("tbody", {}, page.rows.map((r) => h("tr", { "data-id": r.id, onclick: () => showRow(r.id) },
      h("td", { class: "num mono" }, r.id), cols.map((c) => h("td", {}, cell(r.values[c], c, r.id)))))));
  const prev = $("prev-page"), next = $("next-page"), info = $("page-info");
  if (state.search) {
    const s = state.search, total = page.total ?? 0;
    const first = s.page * PAGE;
    // match numbers, not row ids (those are the id column's, 0-based as in the pages)
    info.textContent = total ? `${s.field} = ${s.value}: matches ${fmtInt(first + 1)}–${fmtInt(first + page.rows.length)} of ${fmtInt(total)}` : `no row has ${s.field} = ${s.value}`;
    prev.disabled = s.page === 0;
    next.disabled = first + page.rows.length >= total;
  } else {
    info.textContent = page.total ? `row ids ${fmtInt(page.start)}–${fmtInt(page.stop - 1)} of ${fmtInt(page.total)} rows` : "no rows";
    prev.disabled = page.start === 0;
    next.disabled = page.stop >= page.total;
  }
}

function runSearch() {
  const value = $("search-value").value.trim();
  if (!value) { clearSearch(); return; }
  state.search = { field: $("search-field").value, value, page: 0 };
  $("clear-search").classList.remove("hidden");
  loadRows();
}

function clearSearch() {
  state.search = null;
  $("search-value").value = "";
  $("clear-search").classList.add("hidden");
  loadRows();
}

function turn(delta) {
  if (state.search) state.search.page = Math.max(0, state.search.page + delta);
  else state.start = Math.max(0, state.start + delta * PAGE);
  loadRows();
}

// -- one row in detail ----------------------------------------------------------------------------

async function showRow(id) {
  let page;
  try { page = await api(dsPath(`/rows?start=${id}&stop=${id + 1}`)); } catch (e) { toast(e.message); return; }
  const row = page.rows[0];
  $("detail-title").textContent = `${state.name} · row ${id}`;
  $("detail-body").replaceChildren(...page.columns.map((c) => {
    const v = row.values[c];
    let shown;
    if (state.info.image_columns.includes(c)) shown = h("div", {}, thumb(id, c, 256, "big-thumb"), h("div", { class: "muted" }, describe(v)));
    else if (v && typeof v === "object" && "dtype" in v) shown = h("div", {}, h("div", { class: "muted" }, `${v.dtype} shape [${v.shape.join(", ")}]`), h("pre", {}, JSON.stringify(v.data, (k, x) => fmtFloat(x, v.dtype))));
    else if (v && typeof v === "object" && "base64" in v) shown = h("div", {}, h("div", { class: "muted" }, `${fmtBytes(atob(v.base64).length)} (base64)`), h("pre", {}, v.base64.slice(0, 2000)));
    else if (typeof v === "number") shown = h("pre", {}, String(fmtFloat(v, fieldType(c))) + (className(c, v) === null ? "" : ` (${className(c, v)})`));
    else shown = h("pre", {}, typeof v === "string" ? v : JSON.stringify(v));
    return h("div", { class: "detail-row" }, h("div", { class: "k" }, c), shown);
  }));
  $("detail").classList.remove("hidden");
}

function describe(v) {
  if (v && typeof v === "object" && "dtype" in v) return `${v.dtype} [${v.shape.join(", ")}]`;
  if (v && typeof v === "object" && "base64" in v) return `${fmtBytes(atob(v.base64).length)} encoded image`;
  return "";
}

// -- wiring ----------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("prev-page").addEventListener("click", () => turn(-1));
  $("next-page").addEventListener("click", () => turn(1));
  $("search-form").addEventListener("submit", (e) => { e.preventDefault(); runSearch(); });
  $("clear-search").addEventListener("click", clearSearch);
  $("detail-close").addEventListener("click", () => $("detail").classList.add("hidden"));
  $("detail").addEventListener("click", (e) => { if (e.target === $("detail")) $("detail").classList.add("hidden"); });
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") $("detail").classList.add("hidden"); });
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token-input").value;
    sessionStorage.setItem("mrecord-token", state.token);
    $("token-form").classList.add("hidden");
    loadDatasets();
  });
  loadDatasets();
});
