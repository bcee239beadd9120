// SVG for the charts, drawn here (no library: nothing to download, nothing the page's CSP
// would have to allow): an element builder, a scale with round ticks, the colours, and the
// frame every chart shares (a <figure> with a caption, the picture, and its numbers as a
// table for those who cannot see it).

import { h } from "../dom.js";

const NS = "http://www.w3.org/2000/svg";

// An SVG element: attributes set as given, text children as text nodes.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Round steps for an axis from 0 to at least `max`: [top, step] with 1, 2 or 5 times a
// power of ten, about `count` steps (a max of 0 gives [1, 0.2]: an empty chart has an axis).
export function niceScale(max, count = 5) {
  if (!(max > 0) || !Number.isFinite(max)) return [1, 0.2];
  const rough = max / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= rough);
  const top = Math.ceil(max / step - 1e-9) * step;
  return [top, step];
}

// The ticks of niceScale: 0, step, ..., top (rounded to the step's precision).
export function ticks(top, step) {
  const digits = Math.max(0, -Math.floor(Math.log10(step)));
  const out = [];
  for (let k = 0; k * step <= top + step / 1e6; k++) out.push(Number((k * step).toFixed(digits)));
  return out;
}

// Colours for series (repositories, tokens), readable on white and told apart in grey.
export const PALETTE = ["#2b6cb0", "#d6333a", "#1f8a4c", "#b7791f", "#6b46c1", "#0e7c86", "#97266d", "#4a5568"];
export function colour(index) { return PALETTE[index % PALETTE.length]; }

// Cents, or four decimals for less than a cent (a cheap run is not $0.00).
export function money(usd) {
  const n = Number(usd) || 0;
  return `$${n.toFixed(n !== 0 && n < 0.01 ? 4 : 2)}`;
}

export function count(n) {
  n = Number(n) || 0;
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

// The frame of a chart: <figure> with a caption, the SVG (role img, labelled by its
// <title> and described by <desc>), an optional legend, and the numbers as a table.
export function figure({ id, title, summary, svg, legend, table }) {
  const titleId = `${id}-title`, descId = `${id}-desc`;
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-labelledby", `${titleId} ${descId}`);
  svg.prepend(s("title", { id: titleId }, title), s("desc", { id: descId }, summary));
  return h("figure", { class: "chart", id },
    h("figcaption", {}, h("strong", {}, title), " ", h("span", { class: "muted" }, summary)),
    svg,
    legend && legend.length ? h("ul", { class: "legend" }, legend.map(([name, fill]) =>
      // a presentation attribute, not a style: the page's CSP allows no inline style
      h("li", {}, fill ? s("svg", { class: "swatch", width: 12, height: 12, "aria-hidden": "true" },
        s("rect", { width: 12, height: 12, rx: 2, fill })) : null, name))) : null,
    h("details", { class: "chart-table" }, h("summary", {}, "the numbers as a table"), table));
}

// A table of rows: head is a list of column names, rows lists of cells.
export function dataTable(head, rows) {
  return h("table", {}, h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => (i === 0 ? h("th", { scope: "row" }, c) : h("td", {}, c)))))));
}
