// metaeval view: click a header to sort a table; type in a filter box to hide rows; on a run's
// page, poll the run's state and, when its records change, swap in the parts of the page marked
// data-live from a fresh copy of the same page (parsed by DOMParser, which runs no script; the
// page's Content-Security-Policy forbids inline script and handlers anyway).
"use strict";
function cellValue(row, index) {
  const cell = row.children[index];
  if (!cell) return "";
  const key = cell.getAttribute("data-sort");
  return key !== null ? key : cell.textContent.trim();
}
function compare(a, b) {
  const x = parseFloat(a), y = parseFloat(b);
  if (!isNaN(x) && !isNaN(y)) return x - y;
  return a.localeCompare(b, undefined, {numeric: true});
}
function sortBy(table, th, index) {
  const body = table.tBodies[0];
  if (!body) return;
  const desc = th.classList.contains("asc");
  for (const other of th.parentNode.children) other.classList.remove("asc", "desc");
  th.classList.add(desc ? "desc" : "asc");
  const rows = Array.from(body.rows);
  rows.sort((r1, r2) => compare(cellValue(r1, index), cellValue(r2, index)) * (desc ? -1 : 1));
  for (const row of rows) body.appendChild(row);
}
function bind(root) {
  for (const table of root.querySelectorAll("table.sortable")) {
    const head = table.tHead && table.tHead.rows[0];
    if (!head) continue;
    Array.from(head.cells).forEach((th, i) => th.addEventListener("click", () => sortBy(table, th, i)));
  }
}
function applyFilter(box) {
  const table = document.getElementById(box.getAttribute("data-table"));
  if (!table || !table.tBodies[0]) return;
  const needle = box.value.toLowerCase();
  for (const row of table.tBodies[0].rows) {
    row.classList.toggle("hidden", needle !== "" && !row.textContent.toLowerCase().includes(needle));
  }
}
function stamp(text) {
  const el = document.getElementById("live-stamp");
  if (el) el.textContent = text;
}
async function refresh(state) {
  const page = await fetch(location.href, {cache: "no-store", credentials: "same-origin"});
  if (!page.ok) return;
  const doc = new DOMParser().parseFromString(await page.text(), "text/html");
  for (const old of document.querySelectorAll("[data-live]")) {
    const fresh = doc.getElementById(old.id);
    if (!fresh) continue;
    const node = document.importNode(fresh, true);
    old.replaceWith(node);
    bind(node);
  }
  for (const box of document.querySelectorAll("input.filter")) applyFilter(box);
  document.body.setAttribute("data-version", doc.body.getAttribute("data-version") || state.version);
  stamp((state.running ? "running · " : "") + "updated " + new Date().toLocaleTimeString());
}
function live() {
  const url = document.body.getAttribute("data-state");
  if (!url) return;
  let busy = false;
  async function tick() {
    if (busy) return;
    busy = true;
    try {
      const answer = await fetch(url, {cache: "no-store", credentials: "same-origin"});
      if (!answer.ok) return;
      const state = await answer.json();
      if (state.version !== document.body.getAttribute("data-version")) await refresh(state);
      else if (state.running) stamp("running · checked " + new Date().toLocaleTimeString());
    } catch (err) {
      stamp("live updates paused (" + err + ")");
    } finally {
      busy = false;
    }
  }
  setInterval(tick, 2000);
}
function setup() {
  document.documentElement.setAttribute("data-js", "on");  // the viewer's own script ran
  bind(document);
  for (const box of document.querySelectorAll("input.filter")) {
    box.addEventListener("input", () => applyFilter(box));
  }
  live();
}
document.addEventListener("DOMContentLoaded", setup);
