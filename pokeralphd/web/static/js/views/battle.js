// Battle: one task's battle, live: output as the agent writes it (iteration_output,
// coalesced by the daemon and drawn once per frame here), feedback results, approve or
// reject with a note, pause, resume, cancel, and starting a battle from the task.

import { h, clear, pill, fmtCost, fmtDuration } from "../dom.js";
import { iterationRows, timelineChart } from "../charts/timeline.js";

const MAX_SPANS = 4000;  // output pieces kept on the page (older ones go)
const MAX_CHARS = 1000000;  // and characters: a piece may hold a read of many lines

export async function render(app, root, { repo, item }) {
  if (!repo) { root.append(h("div", { class: "panel empty" }, "No repository registered.")); return; }
  const { tasks } = await app.call("task.list", { repo });
  let taskId = item;
  if (!taskId) {
    const current = await app.call("battle.current", { repo });
    taskId = current.battles[0]?.taskId || tasks.find((t) => t.status === "in_progress")?.id || tasks[0]?.id;
  }
  if (!taskId) { root.append(h("div", { class: "panel empty" }, `${repo} has no tasks yet.`)); return; }
  const task = tasks.find((t) => t.id === taskId);

  const picker = h("select", { onchange: (e) => app.go("battle", repo, e.target.value) },
    tasks.map((t) => h("option", { value: t.id, selected: t.id === taskId }, `${t.id} — ${t.title}`)));
  const head = h("div", { class: "panel", id: "battle-head" });
  const controls = h("div", { class: "panel", id: "battle-controls" });
  const feedback = h("div", { class: "panel", id: "feedback" }, h("h3", {}, "Feedback loops"));
  const output = h("pre", { class: "output", id: "output", "aria-label": "agent output" });
  const iterLabel = h("span", { class: "muted", id: "output-iteration" });
  const timeline = h("div", { class: "panel", id: "battle-timeline", hidden: true });
  root.append(
    h("div", { class: "spread" }, h("h1", {}, "Battle"), picker),
    h("div", { class: "cols" },
      h("div", {}, head, controls, feedback),
      h("div", { class: "panel" }, h("div", { class: "spread" }, h("h3", {}, "Live output"), iterLabel), output)),
    timeline);

  let battle = null;
  let shownIteration = 0;
  // The iteration under way (the output's), or the last one ended: the card and the
  // output always name the same one.
  let current = 0;
  const iterationText = () => {
    const b = battle;
    const number = Math.max(current, b ? b.iterations.length : 0);
    return `${number}${b && b.maxIterations ? ` / ${b.maxIterations}` : ""}`;
  };
  const setCurrent = (number) => {
    current = number;
    const cell = head.querySelector("#iteration");
    if (cell) cell.textContent = iterationText();
  };
  let pending = [];
  let flushQueued = false;
  let shownChars = 0;  // in the output's pieces
  const clearOutput = () => { clear(output); shownChars = 0; };
  const flush = () => {
    flushQueued = false;
    const atBottom = output.scrollTop + output.clientHeight >= output.scrollHeight - 20;
    const frag = document.createDocumentFragment();
    for (const [kind, text] of pending) {
      const shown = text.endsWith("\n") ? text : `${text}\n`;
      shownChars += shown.length;
      frag.append(h("span", { class: `k-${kind}` }, shown));
    }
    pending = [];
    output.append(frag);
    while (output.childNodes.length > 1 && (output.childNodes.length > MAX_SPANS || shownChars > MAX_CHARS)) {
      shownChars -= output.firstChild.textContent.length;
      output.firstChild.remove();
    }
    if (atBottom) output.scrollTop = output.scrollHeight;
  };
  const write = (kind, text) => {
    pending.push([kind, text]);
    if (!flushQueued) { flushQueued = true; requestAnimationFrame(flush); }
  };

  const drawFeedback = (results) => {
    clear(feedback).append(h("h3", {}, "Feedback loops"));
    const entries = Object.entries(results || {});
    if (!entries.length) { feedback.append(h("p", { class: "muted" }, "No results yet.")); return; }
    feedback.append(h("table", {}, h("tbody", {}, entries.map(([loop, r]) => h("tr", { "data-loop": loop },
      h("td", {}, loop), h("td", {}, pill(r.skipped ? "skipped" : r.passed ? "passed" : "failed")),
      h("td", { class: "muted" }, fmtDuration(r.duration)),
      h("td", {}, r.output ? h("details", {}, h("summary", {}, "output"), h("pre", {}, r.output)) : null))))));
  };

  const drawHead = () => {
    const b = battle;
    clear(head).append(
      h("h2", {}, task ? task.title : taskId), h("p", {}, h("code", {}, taskId), " ", pill(b ? b.status : task?.status)),
      task ? h("p", { class: "muted" }, task.description) : null,
      task ? h("ul", {}, task.acceptanceCriteria.map((c) => h("li", {}, c))) : null,
      b ? h("table", { class: "kv" }, h("tbody", {},
        h("tr", {}, h("td", {}, "mode"), h("td", {}, b.mode)),
        h("tr", {}, h("td", {}, "iteration"), h("td", { id: "iteration" }, iterationText())),
        h("tr", {}, h("td", {}, "cost"), h("td", {}, fmtCost(b.costUsd))),
        b.phase ? h("tr", {}, h("td", {}, "phase"), h("td", { id: "phase" }, `${b.phase}` + (b.verification && b.verification.count ? ` (verification cycle ${b.verification.count})` : "") + (b.review && b.review.count ? ` (review cycle ${b.review.count})` : ""))) : null,
        ((sb) => sb ? h("tr", {}, h("td", {}, "sandbox"), h("td", { id: "sandbox", class: sb.confined ? "" : "form-error" }, sb.confined ? `bwrap, network ${sb.network}${sb.allow && sb.allow.length ? ` (${sb.allow.join(", ")})` : ""}, writable ${(sb.writable || []).join(", ") || "nothing"}` : `none (sandbox.mode ${sb.mode}): ${sb.reason}`)) : null)(b.iterations.length ? b.iterations[b.iterations.length - 1].sandbox : null),
        b.pausedReason ? h("tr", {}, h("td", {}, "paused"), h("td", {}, b.pausedReason)) : null,
        b.blocked ? h("tr", {}, h("td", {}, "blocked"), h("td", { id: "blocked" }, b.blocked.reason)) : null,
        b.status === "escalated" ? h("tr", {}, h("td", {}, "escalated"), h("td", { class: "form-error" }, "waits for your answer in the inbox")) : null,
        b.error ? h("tr", {}, h("td", {}, "error"), h("td", { class: "form-error" }, b.error)) : null)) : null);
  };

  const drawControls = () => {
    const status = battle ? battle.status : null;
    const live = ["running", "queued", "awaiting_approval", "paused", "pending", "blocked", "escalated"].includes(status);
    const call = (what, method, params = {}) => app.act(what, () => app.call(method, { repo, taskId, ...params }));
    clear(controls).append(h("h3", {}, "Control"));
    if (!live) {
      const mode = h("select", { name: "mode" }, h("option", { value: "" }, "mode: from config"), h("option", { value: "hitl" }, "HITL (approve each iteration)"), h("option", { value: "yolo" }, "YOLO"));
      const max = h("input", { type: "number", min: 1, max: 100, placeholder: "max iterations", name: "maxIterations" });
      controls.append(h("div", { class: "row" }, mode, max, h("button", { class: "primary", id: "start", onclick: () => {
        const params = {};
        if (mode.value) params.mode = mode.value;
        if (max.value) params.maxIterations = Number(max.value);
        call("start", "battle.start", params).then(load);
      } }, "Start battle")));
      return;
    }
    if (status === "awaiting_approval") {
      const note = h("textarea", { id: "approval-note", placeholder: "a note for the next iteration (optional)" });
      controls.append(h("div", { class: "approval", id: "approval" },
        h("p", {}, h("strong", {}, "This iteration waits for your approval.")), note,
        h("div", { class: "row" },
          h("button", { class: "ok", id: "approve", onclick: () => call("approve", "battle.approve", { approve: true, note: note.value || null }) }, "Approve"),
          h("button", { class: "danger", id: "reject", onclick: () => call("reject", "battle.approve", { approve: false, note: note.value || null }) }, "Reject"))));
    }
    controls.append(h("div", { class: "row" },
      status === "paused" || status === "blocked"
        ? h("button", { id: "resume", onclick: () => call("resume", "battle.resume") }, status === "blocked" ? "Retry now" : "Resume")
        : h("button", { id: "pause", onclick: () => call("pause", "battle.pause") }, "Pause after this iteration"),
      status === "running" ? h("button", { id: "pause-now", onclick: () => call("pause", "battle.pause", { now: true }) }, "Pause now") : null,
      h("button", { class: "danger", id: "cancel", onclick: () => { if (confirm("Cancel this battle? The agent is stopped.")) call("cancel", "battle.cancel"); } }, "Cancel")));
  };

  const load = async () => {
    const [hist, prog] = await Promise.all([
      app.call("battle.history", { repo, taskId }), app.call("battle.progress", { repo, taskId }),
    ]);
    battle = hist.battle;
    if (prog.progress && prog.progress.currentIteration > current) current = prog.progress.currentIteration;
    drawHead();
    timeline.hidden = !(battle && battle.iterations.length);
    if (!timeline.hidden) clear(timeline).append(timelineChart(iterationRows(battle), { id: "battle-timeline-chart" }));
    drawControls();
    drawFeedback(prog.progress ? prog.progress.feedbackResults : null);
    const number = prog.progress ? prog.progress.currentIteration : 0;
    if (number && number !== shownIteration) {
      shownIteration = number;
      iterLabel.textContent = `iteration ${number}`;
      clearOutput();
      try {
        const log = await app.call("battle.log", { repo, taskId, iteration: number, tail: 400 });
        write("text", log.data);
      } catch (err) { /* no log yet */ }
    }
  };

  app.listen((event) => {
    if (event.repo !== repo || event.taskId !== taskId) return;
    const p = event.payload;
    if (event.type === "iteration_output") {
      if (p.iteration !== shownIteration) {
        shownIteration = p.iteration;
        iterLabel.textContent = `iteration ${p.iteration}`;
        setCurrent(p.iteration);
        clearOutput();
        pending = [];
      }
      for (const chunk of p.chunks) write(chunk.kind, chunk.text);
    } else if (event.type === "iteration_start") {
      shownIteration = p.iteration;
      iterLabel.textContent = `iteration ${p.iteration}`;
      setCurrent(p.iteration);
      clearOutput();
      pending = [];
      load();
    } else if (event.type === "feedback_result") {
      drawFeedback(p.results);
    } else if (/^(battle_|iteration_end|await_approval|approval_received)/.test(event.type)) {
      load();
    }
  });
  await load();
}
