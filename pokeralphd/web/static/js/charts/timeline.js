// A battle's iterations in order, from battle.history: per iteration its duration and
// result, its cost, its feedback loops' outcome, and its phase (implementation, and the
// verification or review runs that judged it). iterationRows is the pure part.

import { s, niceScale, colour, money, figure, dataTable } from "./svg.js";
import { fmtDuration } from "../dom.js";

export const RESULT_FILL = { success: "#1f8a4c", failure: "#c53030", timeout: "#b7791f", cancelled: "#718096" };
const FEEDBACK_FILL = { passed: "#1f8a4c", failed: "#c53030", none: "#a0aec0" };

// The feedback loops' outcome: "failed" if one failed, "passed" if one passed and none
// failed, "none" if none ran (or all were skipped).
export function feedbackOutcome(results) {
  const ran = Object.values(results || {}).filter((r) => !r.skipped);
  if (!ran.length) return "none";
  return ran.every((r) => r.passed) ? "passed" : "failed";
}

// One row per iteration: { number, startedAt, durationMs, result, costUsd, feedback,
// loops: [[name, "passed"|"failed"|"skipped"]], phase, judged: [{phase, cycle, outcome,
// passed}] }. An iteration's phase is "implementation"; the reports that judged it say
// which later phases ran on its work.
export function iterationRows(battle) {
  if (!battle) return [];
  const judged = new Map();
  for (const phase of ["verification", "review"]) {
    for (const r of (battle[phase] && battle[phase].reports) || []) {
      if (r.iteration === null || r.iteration === undefined) continue;
      if (!judged.has(r.iteration)) judged.set(r.iteration, []);
      judged.get(r.iteration).push({ phase, cycle: r.cycle, outcome: r.outcome, passed: r.passed, costUsd: r.costUsd ?? null });
    }
  }
  return (battle.iterations || []).map((it) => ({
    number: it.number,
    startedAt: it.startedAt,
    durationMs: it.durationMs ?? 0,
    result: it.result,
    costUsd: it.costUsd ?? 0,
    feedback: feedbackOutcome(it.feedbackResults),
    loops: Object.entries(it.feedbackResults || {}).map(([name, r]) => [name, r.skipped ? "skipped" : r.passed ? "passed" : "failed"]),
    phase: "implementation",
    judged: judged.get(it.number) || [],
  }));
}

function describe(r) {
  const judged = r.judged.map((j) => `${j.phase} ${j.cycle}: ${j.outcome.replaceAll("_", " ")}`);
  const loops = r.loops.map(([name, outcome]) => `${name} ${outcome}`).join(", ") || "no feedback loop ran";
  return `iteration ${r.number}: ${r.result}, ${fmtDuration(r.durationMs)}, ${money(r.costUsd)}; ` +
    `feedback ${r.feedback} (${loops}); phase ${[r.phase, ...judged].join(", then ")}`;
}

const W = 900, LEFT = 96, RIGHT = 12, TOP = 12, BAR = 110, COST = 44, LANE = 24;

export function timelineChart(rows, { id = "timeline-chart" } = {}) {
  const slots = Math.max(rows.length, 6);
  const band = (W - LEFT - RIGHT) / slots;
  const [durTop] = niceScale(Math.max(0, ...rows.map((r) => r.durationMs)));
  const [costTop] = niceScale(Math.max(0, ...rows.map((r) => r.costUsd)));
  const durBase = TOP + BAR, costBase = durBase + 8 + COST;
  const fbY = costBase + 8 + LANE / 2, phaseY = fbY + LANE, numY = phaseY + LANE;
  const H = numY + 8;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart-svg", "data-chart": "timeline" },
    s("g", { class: "axis", "aria-hidden": "true" },
      s("text", { x: LEFT - 8, y: TOP + 12, "text-anchor": "end", class: "axis-label" }, "duration"),
      s("text", { x: LEFT - 8, y: TOP + 26, "text-anchor": "end" }, `to ${fmtDuration(durTop)}`),
      s("text", { x: LEFT - 8, y: durBase + 8 + 12, "text-anchor": "end", class: "axis-label" }, "cost"),
      s("text", { x: LEFT - 8, y: durBase + 8 + 26, "text-anchor": "end" }, `to ${money(costTop)}`),
      s("text", { x: LEFT - 8, y: fbY + 4, "text-anchor": "end", class: "axis-label" }, "feedback"),
      s("text", { x: LEFT - 8, y: phaseY + 4, "text-anchor": "end", class: "axis-label" }, "phase"),
      s("text", { x: LEFT - 8, y: numY - 2, "text-anchor": "end", class: "axis-label" }, "iteration"),
      s("line", { x1: LEFT, x2: W - RIGHT, y1: durBase, y2: durBase, class: "baseline" }),
      s("line", { x1: LEFT, x2: W - RIGHT, y1: costBase, y2: costBase, class: "baseline" })));
  const every = Math.ceil(rows.length / 25);
  rows.forEach((r, i) => {
    const cx = LEFT + band * (i + 0.5), width = Math.max(band * 0.6, 2), x = cx - width / 2;
    const dh = (r.durationMs / durTop) * BAR, ch = (r.costUsd / costTop) * COST;
    const g = s("g", { class: "iteration", "data-iteration": r.number, "data-duration-ms": r.durationMs,
      "data-result": r.result, "data-cost": r.costUsd, "data-feedback": r.feedback,
      "data-phase": [r.phase, ...r.judged.map((j) => `${j.phase}:${j.outcome}`)].join(" ") },
    s("title", {}, describe(r)),
    s("rect", { x, width, y: durBase - Math.max(dh, 1), height: Math.max(dh, 1), fill: RESULT_FILL[r.result] || "#718096", class: "duration" }),
    s("rect", { x, width, y: costBase - Math.max(ch, r.costUsd ? 1 : 0), height: Math.max(ch, r.costUsd ? 1 : 0), fill: colour(0), class: "cost" }),
    s("circle", { cx, cy: fbY, r: Math.min(7, band / 3), fill: FEEDBACK_FILL[r.feedback], class: "feedback" }));
    if (band >= 18) {
      g.append(s("text", { x: cx, y: fbY + 4, "text-anchor": "middle", class: "mark" }, { passed: "✓", failed: "✗", none: "–" }[r.feedback]));
      const marks = r.judged.map((j) => `${j.phase[0].toUpperCase()}${j.passed ? "✓" : "✗"}`).join(" ") || "impl";
      g.append(s("text", { x: cx, y: phaseY + 4, "text-anchor": "middle", class: r.judged.length ? "judged" : "muted" }, marks));
    }
    if (i % every === 0 || i === rows.length - 1) g.append(s("text", { x: cx, y: numY - 2, "text-anchor": "middle" }, String(r.number)));
    if (band >= 50) {
      g.append(s("text", { x: cx, y: durBase - Math.max(dh, 1) - 4, "text-anchor": "middle", class: "value" }, fmtDuration(r.durationMs)),
        s("text", { x: cx, y: costBase - Math.max(ch, 0) - 4, "text-anchor": "middle", class: "value" }, money(r.costUsd)));
    }
    svg.append(g);
  });
  const spent = rows.reduce((a, r) => a + r.costUsd, 0);
  const time = rows.reduce((a, r) => a + r.durationMs, 0);
  return figure({
    id, svg,
    title: "Iterations",
    summary: rows.length ? `${rows.length} iteration(s), ${fmtDuration(time)} of agent time, ${money(spent)}` : "no iteration has ended yet",
    legend: [...Object.entries(RESULT_FILL).map(([k, fill]) => [k, fill]), ["cost", colour(0)],
      ["phase: V verification, R review (✓ passed, ✗ changes asked)", null]],
    table: dataTable(["#", "result", "duration", "cost", "feedback", "phase"], rows.map((r) => [String(r.number), r.result,
      fmtDuration(r.durationMs), money(r.costUsd), `${r.feedback}${r.loops.length ? ` (${r.loops.map(([n, o]) => `${n} ${o}`).join(", ")})` : ""}`,
      [r.phase, ...r.judged.map((j) => `${j.phase} ${j.cycle}: ${j.outcome.replaceAll("_", " ")}`)].join(", then ")])),
  });
}
