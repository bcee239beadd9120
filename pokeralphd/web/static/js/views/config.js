// Config: the effective configuration with the layer each key comes from (default, user,
// repo), editable in the repository's layer; the daemon validates, and its errors are
// shown at the key they name.

import { h, clear, pill, toast } from "../dom.js";

export async function render(app, root, { repo }) {
  if (!repo) { root.append(h("div", { class: "panel empty" }, "No repository registered.")); return; }
  const body = h("div", {});
  root.append(h("h1", {}, `Config — ${repo}`), body);

  const draw = async () => {
    const cfg = await app.call("config.get", { repo });
    const rows = Object.keys(cfg.config).sort().map((key) => {
      const value = cfg.config[key];
      const input = h("textarea", { rows: typeof value === "object" && value !== null ? 3 : 1, "data-key": key, spellcheck: "false" }, JSON.stringify(value, null, typeof value === "object" ? 1 : 0));
      const error = h("div", { class: "field-error", "data-error-for": key });
      const save = async (patchValue) => {
        clear(error);
        input.classList.remove("invalid");
        try {
          await app.call("config.update", { repo, patch: { [key]: patchValue }, expectedVersion: cfg.version });
          toast(`${key} saved`);
          await draw();
        } catch (err) {
          error.append(err.message);
          input.classList.add("invalid");
        }
      };
      return h("tr", { "data-row": key },
        h("td", {}, key), h("td", {}, pill(cfg.sources[key] || "default")),
        h("td", {}, input, error),
        h("td", { class: "row" },
          h("button", { onclick: () => {
            let parsed;
            try { parsed = JSON.parse(input.value); } catch (e) {
              clear(error).append(`not JSON: ${e.message}`);
              input.classList.add("invalid");
              return;
            }
            save(parsed);
          } }, "Save"),
          key in cfg.repoLayer ? h("button", { title: "remove from the repository's layer", onclick: () => save(null) }, "Unset") : null));
    });
    const trust = cfg.trust;
    clear(body).append(
      h("div", { class: "panel" }, h("p", {}, "Edits go to the repository's layer (", h("code", {}, ".pokeralph/config.json"), `), version ${cfg.version}. `,
        trust.trusted ? pill("trusted") : pill("untrusted"), " ", trust.message || ""),
        trust.ignoredKeys.length ? h("p", { class: "form-error" }, `ignored until trusted: ${trust.ignoredKeys.join(", ")}`) : null),
      h("div", { class: "panel" }, h("table", { class: "kv config" }, h("thead", {}, h("tr", {}, ["key", "layer", "value (JSON)", ""].map((t) => h("th", {}, t)))), h("tbody", {}, rows))));
  };
  app.listen((event) => { if (event.repo === repo && event.type === "config_updated") draw().catch(console.warn); });
  await draw();
}
