// Inbox: deliveries across repositories; the content as it should be shown (Markdown
// rendered, text as text, HTML in a sandboxed frame with no scripts), annotations, and the
// feedback form generated from the delivery's schema.

import { h, clear, pill, fmtTime, coalesce, toast } from "../dom.js";
import { renderMarkdown } from "../markdown.js";
import { feedbackForm, answerFields } from "../forms.js";
import { pageKey } from "../rpc.js";

// Deliveries this browser has opened (their ids, the latest last; a bounded list kept in
// localStorage): the others are new. The daemon keeps no read state.
const SEEN_KEY = "pokeralph.inbox.seen";
const SEEN_MAX = 1000;
const WAITING = ["awaiting_feedback", "timeout"];

function seenIds() {
  try { return new Set(JSON.parse(localStorage.getItem(SEEN_KEY) || "[]")); } catch { return new Set(); }
}

function markSeen(id) {
  const ids = [...seenIds()].filter((x) => x !== id);
  ids.push(id);
  localStorage.setItem(SEEN_KEY, JSON.stringify(ids.slice(-SEEN_MAX)));
}

// What the default view shows: what waits for an answer, and what was delivered and not
// yet opened here (a passive delivery included).
export function isNew(item, seen) {
  return WAITING.includes(item.status) || (item.status === "delivered" && !seen.has(item.id));
}

export async function render(app, root, { repo, item }) {
  const list = h("div", { class: "panel", id: "inbox-list" });
  const detail = h("div", { class: "panel", id: "delivery" }, h("p", { class: "muted" }, "Choose a delivery."));
  const filter = h("select", { id: "inbox-filter", "aria-label": "show", onchange: () => drawList() },
    h("option", { value: "new" }, "new and waiting for an answer"),
    h("option", { value: "open" }, "waiting for an answer"), h("option", { value: "" }, "all"));
  root.append(h("div", { class: "spread" }, h("h1", {}, "Inbox"), filter), h("div", { class: "cols" }, list, detail));
  let selected = item ? { repo, id: item } : null;
  if (selected) markSeen(selected.id);

  const drawList = async () => {
    const asked = filter.value === "open" ? { status: "open" } : {};
    const seen = seenIds();
    const isOn = (it) => selected && selected.id === it.id && selected.repo === it.repo;
    const items = (await app.call("inbox.list", asked)).items
      .filter((it) => filter.value !== "new" || isNew(it, seen) || isOn(it));
    clear(list);
    if (!items.length) { list.append(h("p", { class: "empty" }, "Nothing here.")); return; }
    items.sort((a, b) => (a.createdAt < b.createdAt ? 1 : -1));
    for (const it of items) {
      const on = isOn(it);
      const unread = it.status === "delivered" && !seen.has(it.id);
      list.append(h("div", { class: `list-item${on ? " selected" : ""}${unread ? " unread" : ""}`, "data-id": it.id, onclick: () => app.go("inbox", it.repo, it.id) },
        h("div", { class: "spread" }, h("strong", {}, it.title), unread ? h("span", { class: "pill s-new" }, "new") : pill(it.status)),
        h("div", { class: "muted" }, `${it.repo} · ${it.mode} · ${fmtTime(it.createdAt)}`)));
    }
  };

  const drawDetail = async () => {
    if (!selected) return;
    const got = await app.call("inbox.get", { repo: selected.repo, id: selected.id });
    const d = got.delivery;
    markSeen(d.id);
    clear(detail).append(
      h("div", { class: "spread" }, h("h2", {}, d.title), pill(d.status)),
      h("p", { class: "muted" }, `${got.repo} · ${d.mode} · from ${d.source.kind}${d.source.taskId ? ` (${d.source.taskId})` : ""} · ${fmtTime(d.createdAt)}`),
      content(got.repo, d));
    if (d.feedbackSchema && ["awaiting_feedback", "timeout"].includes(d.status)) {
      detail.append(h("h3", {}, "Your answer"), feedbackForm(d.feedbackSchema, async (values, note) => {
        await app.call("inbox.answer", { repo: got.repo, id: d.id, values, note });
        toast("Answer sent");
        await drawDetail();
      }));
    }
    if (got.feedback.length) {
      detail.append(h("h3", {}, "Answers"), h("div", { id: "answers" }, got.feedback.map((f) => h("div", { class: "annotation", "data-feedback": f.id },
        h("dl", { class: "answer" }, answerFields(d.feedbackSchema, f.values).map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)])),
        f.note ? h("div", {}, h("span", { class: "muted" }, "note: "), f.note) : null, h("div", { class: "muted" }, fmtTime(f.createdAt))))));
    }
    const comment = h("textarea", { id: "annotation", rows: 2, placeholder: "a comment on this delivery" });
    detail.append(h("h3", {}, "Annotations"),
      got.annotations.map((a) => h("div", { class: "annotation" }, h("strong", {}, a.type), " ", a.content, h("div", { class: "muted" }, fmtTime(a.createdAt)))),
      comment, h("div", { class: "row" },
        h("button", { onclick: async () => {
          if (!comment.value.trim()) return;
          if (await app.act("annotate", () => app.call("inbox.annotate", { repo: got.repo, id: d.id, content: comment.value }))) drawDetail();
        } }, "Add comment"),
        d.status === "awaiting_feedback" || d.status === "timeout"
          ? h("button", { class: "danger", onclick: () => app.act("close", () => app.call("inbox.close", { repo: got.repo, id: d.id })) }, "Close without answering") : null));
  };

  const redraw = coalesce(() => { drawList().catch(console.warn); drawDetail().catch(console.warn); });
  app.listen((event) => {
    if (/^(new_delivery|feedback_received|delivery_|annotation_added)/.test(event.type)) redraw();
  });
  await drawList();
  await drawDetail();
}

function content(repo, d) {
  const { type, body } = d.content;
  if (type === "html") {
    // No allow-scripts and never allow-same-origin: the frame's content cannot run code,
    // reach this page, its cookie or the daemon; the route adds a CSP of its own.
    return h("iframe", { class: "delivery", sandbox: "", referrerpolicy: "no-referrer", title: d.title,
      src: `/content/${encodeURIComponent(repo)}/${encodeURIComponent(d.id)}?k=${encodeURIComponent(pageKey())}` });
  }
  if (type === "text") return h("pre", {}, body);
  return h("div", { class: "content" }, renderMarkdown(body));
}
