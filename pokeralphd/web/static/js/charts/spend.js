// Spend over time: per day, stacked by repository, from cost.summary {by: "day",
// split: "repo"}. dailyStack is the pure part (tested through the browser), spendChart
// the picture.

import { s, niceScale, ticks, colour, money, figure, dataTable } from "./svg.js";

// The `n` UTC days ending with `today` (a Date), oldest first, as YYYY-MM-DD.
export function lastDays(n, today = new Date()) {
  const end = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate());
  const out = [];
  for (let k = n - 1; k >= 0; k--) out.push(new Date(end - k * 86400000).toISOString().slice(0, 10));
  return out;
}

// Each day's cost per repository: { days, repos, costs: [day][repo], totals: [day] },
// days without spend at 0; repositories by what they spent in all, most first.
export function dailyStack(groups, days) {
  const byDay = new Map(groups.map((g) => [g.key, g]));
  const spent = new Map();
  for (const g of groups) {
    for (const p of g.parts || []) spent.set(p.key, (spent.get(p.key) || 0) + p.costUsd);
  }
  const repos = [...spent.keys()].sort((a, b) => spent.get(b) - spent.get(a) || (a < b ? -1 : 1));
  const costs = days.map((day) => {
    const parts = new Map(((byDay.get(day) || {}).parts || []).map((p) => [p.key, p.costUsd]));
    return repos.map((repo) => parts.get(repo) || 0);
  });
  const totals = costs.map((row) => row.reduce((a, b) => a + b, 0));
  return { days, repos, costs, totals };
}

const W = 900, H = 260, LEFT = 64, RIGHT = 12, TOP = 14, BOTTOM = 40;

export function spendChart({ days, repos, costs, totals }) {
  const [top, step] = niceScale(Math.max(0, ...totals));
  const plotW = W - LEFT - RIGHT, plotH = H - TOP - BOTTOM;
  const band = plotW / Math.max(days.length, 1);
  const y = (v) => TOP + plotH - (v / top) * plotH;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", "data-chart": "spend" });
  const axis = s("g", { class: "axis", "aria-hidden": "true" });
  for (const t of ticks(top, step)) {
    axis.append(s("line", { x1: LEFT, x2: W - RIGHT, y1: y(t), y2: y(t), class: "grid" }),
      s("text", { x: LEFT - 6, y: y(t) + 4, "text-anchor": "end" }, `$${t}`));
  }
  const every = Math.ceil(days.length / 15);  // at most ~15 day labels
  days.forEach((day, i) => {
    if ((days.length - 1 - i) % every === 0) {  // today always named
      axis.append(s("text", { x: LEFT + band * (i + 0.5), y: H - BOTTOM + 16, "text-anchor": "middle" }, day.slice(5)));
    }
  });
  axis.append(s("text", { x: LEFT + plotW / 2, y: H - 4, "text-anchor": "middle", class: "axis-label" }, "day (UTC)"),
    s("text", { x: 12, y: TOP + plotH / 2, "text-anchor": "middle", class: "axis-label", transform: `rotate(-90 12 ${TOP + plotH / 2})` }, "spend (USD)"));
  svg.append(axis);
  const bars = s("g", { class: "bars" });
  days.forEach((day, i) => {
    const x = LEFT + band * i + band * 0.15, width = band * 0.7;
    const col = s("g", { class: "day", "data-day": day, "data-total": totals[i] },
      s("title", {}, `${day}: ${money(totals[i])} in all`));
    let base = 0;
    repos.forEach((repo, r) => {
      const v = costs[i][r];
      if (!v) return;
      col.append(s("rect", { x, width, y: y(base + v), height: Math.max(y(base) - y(base + v), 0.5), fill: colour(r),
        "data-repo": repo, "data-cost": v }, s("title", {}, `${day} · ${repo}: ${money(v)}`)));
      base += v;
    });
    bars.append(col);
  });
  svg.append(bars, s("line", { x1: LEFT, x2: W - RIGHT, y1: y(0), y2: y(0), class: "baseline" }));
  const total = totals.reduce((a, b) => a + b, 0);
  return figure({
    id: "spend-chart", svg,
    title: "Spend per day",
    summary: `${money(total)} over the last ${days.length} days (UTC), stacked by repository`,
    legend: repos.map((repo, r) => [repo, colour(r)]),
    table: dataTable(["day", ...repos, "total"], days.map((day, i) => [day, ...costs[i].map(money), money(totals[i])])),
  });
}
