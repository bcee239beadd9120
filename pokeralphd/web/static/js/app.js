// The dashboard: a client of the daemon's JSON-RPC protocol over /ws, with hash routes
// #/<view>/<repo>/<item>. Each view renders into <main> and listens to events while shown.

import { Rpc, pageKey } from "./rpc.js";
import { h, clear, toast } from "./dom.js";
import * as dashboard from "./views/dashboard.js";
import * as battle from "./views/battle.js";
import * as history from "./views/history.js";
import * as planning from "./views/planning.js";
import * as inbox from "./views/inbox.js";
import * as config from "./views/config.js";
import * as spend from "./views/spend.js";

const VIEWS = { dashboard, battle, history, planning, inbox, spend, config };

class App {
  constructor() {
    this.rpc = new Rpc(() => `ws://${location.host}/ws?k=${encodeURIComponent(pageKey())}`);
    this.root = document.getElementById("view");
    this.repos = [];
    this.repo = localStorage.getItem("pokeralph.repo") || null;
    this.listeners = new Set();
    this.rendering = 0;
    this.rpc.onEvent((event) => this.dispatch(event));
    this.rpc.onState((state, detail) => this.connection(state, detail));
    window.addEventListener("hashchange", () => this.route());
    document.getElementById("repo-select").addEventListener("change", (e) => {
      this.setRepo(e.target.value);
      const [view] = this.parts();
      this.go(view, this.repo);
    });
  }

  call(method, params) { return this.rpc.call(method, params); }

  // A view's event listener, dropped when the view changes.
  listen(fn) { this.listeners.add(fn); }

  dispatch(event) {
    if (["repo_registered", "repo_unregistered"].includes(event.type)) this.loadRepos();
    if (["new_delivery", "feedback_received", "delivery_closed", "delivery_timeout"].includes(event.type)) this.inboxCount();
    for (const fn of this.listeners) {
      try { fn(event); } catch (err) { console.error(err); }
    }
  }

  connection(state, detail) {
    const el = document.getElementById("conn");
    el.className = `conn ${state}`;
    el.textContent = { open: "live", connecting: "connecting", closed: "reconnecting…", refused: "not signed in" }[state] || state;
    document.body.dataset.conn = state;
    if (state === "open") {
      const first = !this.started;
      this.started = true;
      this.loadRepos().then(() => { if (first || (detail && detail.reload)) this.route(); });
      this.inboxCount();
    }
    if (state === "refused") {
      clear(this.root).append(h("div", { class: "panel" }, h("h1", {}, "Not signed in"),
        h("p", {}, "Open the dashboard with ", h("code", {}, "pokeralphctl web --open"), ".")));
    }
  }

  async loadRepos() {
    this.repos = await this.call("repo.list");
    const select = clear(document.getElementById("repo-select"));
    for (const repo of this.repos) select.append(h("option", { value: repo.name }, repo.name));
    if (!this.repos.some((r) => r.name === this.repo)) this.setRepo(this.repos[0]?.name ?? null);
    select.value = this.repo ?? "";
  }

  setRepo(name) {
    this.repo = name;
    if (name) localStorage.setItem("pokeralph.repo", name);
    document.getElementById("repo-select").value = name ?? "";
  }

  async inboxCount() {
    try {
      const { items } = await this.call("inbox.list", { status: "open" });
      const badge = document.getElementById("inbox-count");
      badge.textContent = String(items.length);
      badge.hidden = items.length === 0;
    } catch (err) { console.warn(err); }
  }

  parts() {
    const raw = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    return [VIEWS[raw[0]] ? raw[0] : "dashboard", raw[1] || null, raw[2] || null];
  }

  go(view, repo, item) {
    const parts = [view, repo, item].filter((p) => p !== null && p !== undefined).map(encodeURIComponent);
    const hash = `#/${parts.join("/")}`;
    if (location.hash === hash) this.route(); else location.hash = hash;
  }

  async route() {
    if (this.rpc.state !== "open") return;
    const [view, repo, item] = this.parts();
    if (repo && repo !== this.repo && this.repos.some((r) => r.name === repo)) this.setRepo(repo);
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === view);
    this.listeners.clear();
    const token = ++this.rendering;
    const root = clear(this.root);
    root.dataset.view = view;
    try {
      await VIEWS[view].render(this, root, { repo: repo || this.repo, item });
    } catch (err) {
      if (token !== this.rendering) return;
      console.error(err);
      root.append(h("div", { class: "panel form-error" }, `Could not show this view: ${err.message}`));
    }
    if (token === this.rendering) root.dataset.ready = "1";
  }

  // Runs an action; a failure becomes a toast (and is returned as false).
  async act(what, fn) {
    try {
      const result = await fn();
      return result === undefined ? true : result;
    } catch (err) {
      toast(`${what}: ${err.message}`, true);
      return false;
    }
  }
}

window.pokeralph = new App();
