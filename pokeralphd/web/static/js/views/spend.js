// Spend: what the agents cost, from the daemon's ledger (cost.summary): per day stacked by
// repository, and per task with its tokens, over the last 7, 30 or 90 days (UTC); redrawn
// when an iteration ends.

import { h, clear, coalesce } from "../dom.js";
import { lastDays, dailyStack, spendChart } from "../charts/spend.js";
import { taskRows, tasksChart } from "../charts/tasks.js";

export async function render(app, root) {
  const range = h("select", { id: "spend-range", "aria-label": "days shown", onchange: () => draw() },
    [7, 30, 90].map((n) => h("option", { value: n, selected: n === 30 }, `last ${n} days`)));
  const body = h("div", {});
  root.append(h("div", { class: "spread" }, h("h1", {}, "Spend"), range), body);

  const draw = async () => {
    const days = lastDays(Number(range.value));
    const bounds = { since: days[0], until: days[days.length - 1] };
    const [daily, tasks] = await Promise.all([
      app.call("cost.summary", { by: "day", split: "repo", ...bounds }),
      app.call("cost.summary", { by: "task", ...bounds }),
    ]);
    clear(body).append(
      h("div", { class: "panel" }, spendChart(dailyStack(daily.groups, days))),
      h("div", { class: "panel" }, tasksChart(taskRows(tasks.groups))),
      daily.skipped ? h("p", { class: "form-error" }, `${daily.skipped} ledger line(s) could not be read (see the daemon's log).`) : null);
  };
  const redraw = coalesce(() => draw().catch(console.warn));
  app.listen((event) => { if (/^(iteration_end|battle_)/.test(event.type)) redraw(); });
  await draw();
}
