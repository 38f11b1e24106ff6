// metaeval view: click a header to sort a table; type in a filter box to hide rows.
// Reads text from the page only (textContent), never writes markup.
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
function setup() {
  document.documentElement.setAttribute("data-js", "on");  // the viewer's own script ran
  for (const table of document.querySelectorAll("table.sortable")) {
    const head = table.tHead && table.tHead.rows[0];
    if (!head) continue;
    Array.from(head.cells).forEach((th, i) => th.addEventListener("click", () => sortBy(table, th, i)));
  }
  for (const box of document.querySelectorAll("input.filter")) {
    const table = document.getElementById(box.getAttribute("data-table"));
    if (!table || !table.tBodies[0]) continue;
    box.addEventListener("input", () => {
      const needle = box.value.toLowerCase();
      for (const row of table.tBodies[0].rows) {
        row.classList.toggle("hidden", needle !== "" && !row.textContent.toLowerCase().includes(needle));
      }
    });
  }
}
document.addEventListener("DOMContentLoaded", setup);
