// Spend and tokens per task, from cost.summary {by: "task"}: two bars per task, what it
// cost and the tokens it used (stacked by kind). taskRows is the pure part.

import { s, niceScale, colour, money, count, figure, dataTable } from "./svg.js";

export const TOKEN_KINDS = [
  ["inputTokens", "input"], ["outputTokens", "output"],
  ["cacheReadInputTokens", "cache read"], ["cacheCreationInputTokens", "cache write"],
  ["reasoningOutputTokens", "reasoning"],
];

// The `limit` costliest tasks: { key, cost, iterations, tokens: {kind: n}, totalTokens },
// most first (ties by key), and how many were left out.
export function taskRows(groups, limit = 15) {
  const rows = groups.map((g) => {
    const tokens = Object.fromEntries(TOKEN_KINDS.map(([k]) => [k, (g.tokens && g.tokens[k]) || 0]));
    return { key: g.key, cost: g.costUsd, iterations: g.iterations, tokens,
      totalTokens: Object.values(tokens).reduce((a, b) => a + b, 0) };
  });
  rows.sort((a, b) => b.cost - a.cost || b.totalTokens - a.totalTokens || (a.key < b.key ? -1 : 1));
  return { rows: rows.slice(0, limit), omitted: Math.max(rows.length - limit, 0) };
}

const W = 900, LABEL = 260, GAP = 24, ROW = 26, TOP = 26, BOTTOM = 8;

export function tasksChart({ rows, omitted }) {
  const colW = (W - LABEL - GAP * 2) / 2;
  const H = TOP + ROW * Math.max(rows.length, 1) + BOTTOM;
  const [costTop] = niceScale(Math.max(0, ...rows.map((r) => r.cost)));
  const [tokTop] = niceScale(Math.max(0, ...rows.map((r) => r.totalTokens)));
  const costX = LABEL + GAP, tokX = costX + colW + GAP;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", "data-chart": "tasks" },
    s("g", { class: "axis", "aria-hidden": "true" },
      s("text", { x: costX, y: 14, class: "axis-label" }, `spend (USD, scale to ${money(costTop)})`),
      s("text", { x: tokX, y: 14, class: "axis-label" }, `tokens (scale to ${count(tokTop)})`)));
  rows.forEach((r, i) => {
    const y = TOP + ROW * i;
    const label = r.key.length > 38 ? `${r.key.slice(0, 37)}…` : r.key;
    const row = s("g", { class: "task", "data-task": r.key, "data-cost": r.cost, "data-tokens": r.totalTokens },
      s("title", {}, `${r.key}: ${money(r.cost)}, ${count(r.totalTokens)} tokens, ${r.iterations} run(s)`),
      s("text", { x: LABEL - 8, y: y + 15, "text-anchor": "end" }, label),
      s("rect", { x: costX, y: y + 4, height: ROW - 10, width: Math.max((r.cost / costTop) * colW, r.cost ? 1 : 0), fill: colour(0), class: "cost" },
        s("title", {}, `${r.key}: ${money(r.cost)}`)),
      s("text", { x: costX + (r.cost / costTop) * colW + 4, y: y + 15, class: "value" }, money(r.cost)));
    let base = 0;
    TOKEN_KINDS.forEach(([kind, name], k) => {
      const n = r.tokens[kind];
      if (!n) return;
      row.append(s("rect", { x: tokX + (base / tokTop) * colW, y: y + 4, height: ROW - 10, width: (n / tokTop) * colW,
        fill: colour(k + 2), "data-kind": kind, "data-count": n }, s("title", {}, `${r.key}: ${count(n)} ${name} tokens`)));
      base += n;
    });
    row.append(s("text", { x: tokX + (base / tokTop) * colW + 4, y: y + 15, class: "value" }, count(r.totalTokens)));
    svg.append(row);
  });
  const total = rows.reduce((a, r) => a + r.cost, 0);
  return figure({
    id: "tasks-chart", svg,
    title: "Spend and tokens per task",
    summary: rows.length
      ? `the ${rows.length} costliest task(s), ${money(total)} in all${omitted ? ` (${omitted} more not shown)` : ""}`
      : "nothing spent in these days",
    legend: [["spend", colour(0)], ...TOKEN_KINDS.map(([, name], k) => [`${name} tokens`, colour(k + 2)])],
    table: dataTable(["task", "spend", "runs", ...TOKEN_KINDS.map(([, name]) => `${name} tokens`)],
      rows.map((r) => [r.key, money(r.cost), r.iterations, ...TOKEN_KINDS.map(([k]) => count(r.tokens[k]))])),
  });
}
