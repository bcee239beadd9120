// Dashboard: every repository, its PRD and tasks with status, and the battles running,
// queued and waiting on a person; live (redrawn as events come).

import { h, clear, pill, fmtCost, coalesce } from "../dom.js";

const LIVE = /^(battle_|task_|prd_updated|iteration_(start|end)|await_approval|approval_received|repo_|new_delivery|feedback_received|delivery_)/;

export async function render(app, root) {
  const body = h("div", {});
  root.append(h("div", { class: "spread" }, h("h1", {}, "Dashboard"),
    h("span", { class: "muted" }, "live: redrawn as the daemon reports changes")), body);
  const draw = async () => {
    const [current, repos, open] = await Promise.all([
      app.call("battle.current"), app.call("repo.list"), app.call("inbox.list", { status: "open" }),
    ]);
    const details = await Promise.all(repos.map(async (repo) => {
      if (repo.error) return { repo };
      const [status, prd] = await Promise.all([
        app.call("repo.status", { repo: repo.name }), app.call("prd.get", { repo: repo.name }),
      ]);
      return { repo, status, prd: prd.prd };
    }));
    clear(body).append(summary(app, current, open.items), details.length
      ? h("div", { class: "grid" }, details.map((d) => repoPanel(app, d, current)))
      : h("div", { class: "panel empty" }, "No repositories yet: register one with ", h("code", {}, "pokeralphctl init PATH"), "."));
  };
  const redraw = coalesce(() => draw().catch((err) => console.warn(err)));
  app.listen((event) => { if (LIVE.test(event.type)) redraw(); });
  await draw();
}

function summary(app, current, openItems) {
  const by = (s) => current.battles.filter((b) => b.status === s);
  const running = by("running"), queued = by("queued"), paused = by("paused");
  const waiting = [...by("awaiting_approval"), ...by("escalated")];
  const rows = current.battles.map((b) => h("tr", {},
    h("td", {}, b.repo), h("td", { class: "task-id" }, h("a", { href: `#/battle/${encodeURIComponent(b.repo)}/${encodeURIComponent(b.taskId)}`, title: b.taskId }, b.taskId)),
    h("td", {}, pill(b.status)), h("td", {}, b.mode), h("td", {}, `${b.iteration}${b.maxIterations ? ` / ${b.maxIterations}` : ""}`),
    h("td", {}, fmtCost(b.costUsd)),
    h("td", { class: "muted" }, [b.pausedReason || b.blockedReason || "", ...(b.warnings || []).map((w) => h("div", { class: "form-error" }, `! ${w}`))])));
  return h("div", { class: "panel", id: "battles-summary" },
    h("div", { class: "stats" },
      stat("running", running.length), stat("queued", queued.length + current.engine.waiting),
      stat("waiting on you", waiting.length + openItems.length), stat("paused", paused.length),
      stat("free slots", current.engine.slotsFree)),
    rows.length ? h("table", { class: "battles" }, h("thead", {}, h("tr", {},
      ["repository", "task", "status", "mode", "iteration", "cost", ""].map((t) => h("th", {}, t)))), h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No battle is active."),
    openItems.length ? h("p", {}, h("a", { href: "#/inbox" }, `${openItems.length} inbox item(s) wait for an answer`)) : null);
}

function stat(label, value) {
  return h("div", {}, h("span", {}, label), h("div", { class: "stat" }, String(value)));
}

function repoPanel(app, { repo, status, prd }, current) {
  if (repo.error) {
    return h("div", { class: "panel" }, h("h2", {}, repo.name), h("p", { class: "form-error" }, repo.error));
  }
  const active = current.battles.find((b) => b.repo === repo.name);
  const tasks = (prd && prd.tasks) || [];
  const counts = Object.entries(status.tasks || {}).filter(([, n]) => n).map(([s, n]) => h("span", {}, pill(s), ` ${n} `));
  return h("div", { class: "panel repo", "data-repo": repo.name },
    h("div", { class: "spread" }, h("h2", {}, repo.name), h("span", { class: "muted" }, repo.path)),
    prd ? h("p", {}, h("strong", {}, prd.name), " — ", prd.description) : h("p", { class: "muted" }, "No PRD yet: plan one in ", h("a", { href: `#/planning/${encodeURIComponent(repo.name)}` }, "Planning"), "."),
    h("div", { class: "row" }, counts),
    tasks.length ? h("table", { class: "tasks" },
      h("thead", {}, h("tr", {}, ["task", "title", "status", "", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, tasks.map((task) => taskRow(app, repo.name, task, active)))) : null);
}

function taskRow(app, repo, task, active) {
  const link = (view) => `#/${view}/${encodeURIComponent(repo)}/${encodeURIComponent(task.id)}`;
  const isActive = active && active.taskId === task.id;
  const canStart = !active && ["pending", "paused", "failed"].includes(task.status);
  return h("tr", { "data-task": task.id },
    h("td", { class: "task-id" }, h("code", { title: task.id }, task.id)), h("td", { class: "title" }, task.title),
    h("td", {}, pill(isActive ? active.status : task.status)),
    h("td", {}, canStart ? h("button", { class: "primary", "data-action": "start", onclick: async () => {
      if (await app.act("start", () => app.call("battle.start", { repo, taskId: task.id }))) app.go("battle", repo, task.id);
    } }, "Start battle") : isActive ? h("a", { href: link("battle") }, "watch") : null),
    h("td", {}, h("a", { href: link("history") }, "history")));
}
