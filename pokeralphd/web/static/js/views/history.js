// History: a task's iterations drawn on a timeline and listed with result, duration,
// cost, files changed and commit, and the diff of each commit (battle.diff).

import { h, clear, pill, fmtCost, fmtDuration, fmtTime, coalesce } from "../dom.js";
import { iterationRows, timelineChart } from "../charts/timeline.js";

export async function render(app, root, { repo, item }) {
  if (!repo) { root.append(h("div", { class: "panel empty" }, "No repository registered.")); return; }
  const { tasks } = await app.call("task.list", { repo });
  const taskId = item || tasks.find((t) => t.iterations && t.iterations.length)?.id || tasks[0]?.id;
  if (!taskId) { root.append(h("div", { class: "panel empty" }, `${repo} has no tasks yet.`)); return; }
  const picker = h("select", { onchange: (e) => app.go("history", repo, e.target.value) },
    tasks.map((t) => h("option", { value: t.id, selected: t.id === taskId }, `${t.id} — ${t.title}`)));
  const table = h("div", { class: "panel", id: "iterations" });
  const diff = h("div", { class: "panel", id: "diff" }, h("p", { class: "muted" }, "Choose a commit to see its diff."));
  root.append(h("div", { class: "spread" }, h("h1", {}, "History"), picker), table, diff);

  const showDiff = async (iteration) => {
    clear(diff).append(h("p", { class: "muted" }, "loading…"));
    try {
      const d = await app.call("battle.diff", { repo, taskId, iteration });
      const pre = h("pre", { class: "diff" });
      for (const line of d.diff.split("\n")) {
        const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
          : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
        pre.append(h("span", { class: cls }, line + "\n"));
      }
      clear(diff).append(h("h3", {}, `Iteration ${d.iteration}: commit `, h("code", {}, d.commit.slice(0, 12))),
        d.truncated ? h("p", { class: "form-error" }, "The diff is cut here (too long to show whole).") : null, pre);
    } catch (err) {
      clear(diff).append(h("p", { class: "form-error" }, err.message));
    }
  };

  const draw = async () => {
    const { battle } = await app.call("battle.history", { repo, taskId });
    clear(table);
    if (!battle) { table.append(h("p", { class: "muted" }, "No battle has run for this task yet.")); return; }
    table.append(
      h("div", { class: "spread" }, h("h2", {}, taskId, " ", pill(battle.status)),
        h("span", { class: "muted" }, `started ${fmtTime(battle.startedAt)} · ${battle.iterations.length} iteration(s) · ${fmtCost(battle.costUsd)} · ${fmtDuration(battle.durationMs)}`)),
      timelineChart(iterationRows(battle)),
      h("table", {}, h("thead", {}, h("tr", {}, ["#", "result", "duration", "cost", "files changed", "commit", "note"].map((t) => h("th", {}, t)))),
        h("tbody", {}, battle.iterations.map((it) => h("tr", { "data-iteration": it.number },
          h("td", {}, String(it.number)), h("td", {}, pill(it.result), it.error ? h("div", { class: "field-error" }, it.error) : null),
          h("td", {}, fmtDuration(it.durationMs)), h("td", {}, fmtCost(it.costUsd)),
          h("td", {}, it.filesChanged.length ? h("details", {}, h("summary", {}, `${it.filesChanged.length} file(s)`), h("ul", {}, it.filesChanged.map((f) => h("li", {}, h("code", {}, f))))) : h("span", { class: "muted" }, "none")),
          h("td", {}, it.commitHash ? h("button", { class: "commit", onclick: () => showDiff(it.number) }, it.commitHash.slice(0, 10)) : h("span", { class: "muted" }, "-")),
          h("td", { class: "muted" }, it.approvalNote || ""))))));
  };
  const redraw = coalesce(() => draw().catch(console.warn));
  app.listen((event) => {
    if (event.repo === repo && event.taskId === taskId && /^(iteration_end|battle_)/.test(event.type)) redraw();
  });
  await draw();
}
