// Planning: an idea becomes the agent's questions and your answers, then a PRD draft to
// review, validate and save (replacing or merging with the PRD there is).

import { h, clear, pill, coalesce } from "../dom.js";
import { renderMarkdown } from "../markdown.js";

export async function render(app, root, { repo }) {
  if (!repo) { root.append(h("div", { class: "panel empty" }, "No repository registered.")); return; }
  const body = h("div", {});
  const output = h("pre", { class: "output", id: "planning-output" });
  root.append(h("div", { class: "spread" }, h("h1", {}, `Planning — ${repo}`)), body);
  const call = (what, method, params = {}) => app.act(what, () => app.call(method, { repo, ...params }));

  const draw = async () => {
    const s = await app.call("planning.status", { repo });
    clear(body).append(h("div", { class: "panel" }, h("div", { class: "spread" }, h("h2", {}, "Session ", pill(s.state)),
      s.state !== "idle" ? h("button", { class: "danger", onclick: () => call("reset", "planning.reset").then(draw) }, "Reset") : null),
      s.idea ? h("p", {}, h("strong", {}, "Idea: "), s.idea) : null,
      s.error ? h("p", { class: "form-error" }, s.error) : null));
    if (s.state === "idle") {
      const idea = h("textarea", { id: "idea", rows: 5, placeholder: "Describe what you want built…" });
      const breakdown = h("input", { type: "checkbox", id: "breakdown" });
      body.append(h("div", { class: "panel" }, h("h3", {}, "Start from an idea"), idea,
        h("label", {}, breakdown, " break the PRD's description down into tasks instead"),
        h("div", { class: "row" }, h("button", { class: "primary", id: "plan", onclick: () => {
          const params = breakdown.checked ? { breakdown: true } : { idea: idea.value };
          call("plan", "planning.start", params).then(draw);
        } }, "Plan"))));
      return;
    }
    if (s.state === "planning") {
      if (!output.firstChild && s.lastOutput) output.append(s.lastOutput);
      body.append(h("div", { class: "panel" }, h("h3", {}, "The agent is working"), output));
    }
    if (s.state === "waiting_input") {
      const answer = h("textarea", { id: "answer", rows: 5, placeholder: "Your answers" });
      body.append(h("div", { class: "panel" }, h("h3", {}, "Questions"),
        h("ol", {}, s.questions.map((q) => h("li", {}, renderMarkdown(q)))), answer,
        h("div", { class: "row" }, h("button", { class: "primary", onclick: () => call("answer", "planning.answer", { answer: answer.value }).then(draw) }, "Answer"))));
    }
    if (s.prd) {
      const problems = h("div", {}, s.problems.map((p) => h("div", { class: "form-error" }, `${p.field}: ${p.problem}`)));
      const check = (save, merge) => async () => {
        const r = await app.act("finish", () => app.call("planning.finish", { repo, save, merge }));
        if (!r) return;
        clear(problems).append(r.valid
          ? h("div", { class: "pill s-passed" }, r.saved ? `saved (version ${r.version})` : "the draft is valid")
          : r.problems.map((p) => h("div", { class: "form-error" }, `${p.field}: ${p.problem}`)));
      };
      body.append(h("div", { class: "panel", id: "prd-draft" }, h("h3", {}, "PRD draft"), prdView(s.prd), problems,
        h("div", { class: "row" },
          h("button", { onclick: check(false, "replace") }, "Validate"),
          h("button", { class: "primary", onclick: check(true, "replace") }, "Save (replace)"),
          h("button", { onclick: check(true, "merge") }, "Save (merge with the PRD there)"))));
    }
  };
  const redraw = coalesce(() => draw().catch(console.warn));
  app.listen((event) => {
    if (event.repo !== repo) return;
    if (event.type === "planning_output") {
      for (const c of event.payload.chunks) output.append(h("span", { class: `k-${c.kind}` }, c.text));
      output.scrollTop = output.scrollHeight;
    } else if (/^planning_/.test(event.type)) {
      redraw();
    }
  });
  await draw();
}

function prdView(prd) {
  return h("div", {}, h("h2", {}, prd.name || "(no name)"), renderMarkdown(prd.description || ""),
    h("ol", {}, (prd.tasks || []).map((t) => h("li", {}, h("strong", {}, t.title || "(untitled)"), " ", h("span", { class: "muted" }, t.description || ""),
      h("ul", {}, (t.acceptanceCriteria || []).map((c) => h("li", {}, c)))))));
}
