// Feedback forms generated from a delivery's schema (confirm, select, form, rating),
// checked here before sending, with the daemon's own validation errors shown in place
// (an error's data.field names the input: "value", "values", "values.<name>").

import { h, clear } from "./dom.js";

export function feedbackForm(schema, submit) {
  const form = h("form", { class: "feedback", novalidate: true, "data-schema": schema.type });
  const general = h("div", { class: "form-error", role: "alert" });
  const errors = new Map();  // field path -> error element
  const note = h("textarea", { name: "__note", placeholder: "a note (optional)", rows: 2 });
  let collect;

  const errorSlot = (path) => {
    const el = h("div", { class: "field-error", "data-error-for": path });
    errors.set(path, el);
    return el;
  };
  const showErrors = (problems) => {
    for (const el of errors.values()) clear(el);
    clear(general);
    form.querySelectorAll(".invalid").forEach((el) => el.classList.remove("invalid"));
    for (const [path, message] of problems) {
      const slot = errors.get(path) || general;
      slot.append(message);
      form.querySelector(`[data-path="${CSS.escape(path)}"]`)?.classList.add("invalid");
    }
  };
  const send = async (values) => {
    showErrors([]);
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    try {
      await submit(values, note.value.trim() || null);
    } catch (err) {
      const field = err.data && err.data.field;
      showErrors([[field && errors.has(field) ? field : "", err.message]]);
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  };

  if (schema.prompt) form.append(h("p", { class: "prompt" }, h("strong", {}, schema.prompt)));

  if (schema.type === "confirm") {
    form.append(errorSlot("value"), note, h("div", { class: "row" },
      h("button", { type: "button", class: "ok", "data-answer": "yes", onclick: () => send({ value: true }) }, schema.confirmLabel || "Confirm"),
      h("button", { type: "button", class: "danger", "data-answer": "no", onclick: () => send({ value: false }) }, schema.cancelLabel || "Cancel")));
  } else if (schema.type === "select") {
    const name = `select-${Math.random().toString(36).slice(2)}`;
    const box = h("div", { "data-path": "value" }, schema.options.map((option) =>
      h("label", { class: "field" }, h("input", { type: schema.multiple ? "checkbox" : "radio", name, value: option }), " ", option)));
    form.append(box, errorSlot("value"));
    collect = () => {
      const chosen = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      if (!chosen.length) return [null, [["value", "choose an option"]]];
      return [{ value: schema.multiple ? chosen : chosen[0] }, []];
    };
  } else if (schema.type === "rating") {
    const max = schema.max || 5;
    let chosen = null;
    const buttons = [];
    const row = h("div", { class: "row rating", "data-path": "value" });
    for (let n = 1; n <= max; n++) {
      const b = h("button", { type: "button", "data-rating": n, onclick: () => {
        chosen = n;
        buttons.forEach((x, k) => x.classList.toggle("on", k < n));
      } }, String(n));
      buttons.push(b);
      row.append(b);
    }
    form.append(row, errorSlot("value"));
    collect = () => (chosen ? [{ value: chosen }, []] : [null, [["value", `choose a rating from 1 to ${max}`]]]);
  } else if (schema.type === "form") {
    const inputs = [];
    for (const field of schema.fields) {
      const path = `values.${field.name}`;
      const label = (field.label || field.name) + (field.required ? " *" : "");
      let input;
      if (field.type === "textarea") {
        input = h("textarea", { name: field.name, placeholder: field.placeholder || "", "data-path": path });
      } else if (field.type === "select") {
        input = h("select", { name: field.name, "data-path": path },
          h("option", { value: "" }, "—"), (field.options || []).map((o) => h("option", { value: o }, o)));
      } else if (field.type === "checkbox") {
        input = h("input", { type: "checkbox", name: field.name, "data-path": path });
      } else {
        input = h("input", { type: field.type === "number" ? "number" : "text", step: "any", name: field.name, placeholder: field.placeholder || "", "data-path": path });
      }
      inputs.push([field, input, path]);
      form.append(h("label", { class: "field" }, h("span", {}, label), input, errorSlot(path)));
    }
    collect = () => {
      const values = {};
      const problems = [];
      for (const [field, input, path] of inputs) {
        if (field.type === "checkbox") { values[field.name] = input.checked; continue; }
        const raw = input.value;
        if (!raw.trim()) {
          if (field.required) problems.push([path, `${field.label || field.name} is required`]);
          continue;
        }
        if (field.type === "number") {
          const number = Number(raw);
          if (!Number.isFinite(number)) { problems.push([path, "must be a number"]); continue; }
          values[field.name] = number;
        } else {
          values[field.name] = raw;
        }
      }
      return [{ values }, problems];
    };
  }
  errorSlot("values");
  form.append(errors.get("values"));
  if (collect) {
    form.append(note, h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Send")));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const [values, problems] = collect();
      if (problems.length) { showErrors(problems); return; }
      send(values);
    });
  } else {
    form.addEventListener("submit", (e) => e.preventDefault());
  }
  form.append(general);
  return form;
}

// An answer as labelled fields, [label, text] pairs, from the schema it answered: a form's
// fields by their labels (in the schema's order), a choice, a rating out of its maximum,
// yes or no by the confirm's own labels; what the schema does not name, by its key.
export function answerFields(schema, values) {
  const text = (v) => (v === true ? "yes" : v === false ? "no" : v === null || v === undefined ? "—"
    : Array.isArray(v) ? v.map(text).join(", ") : typeof v === "object" ? JSON.stringify(v) : String(v));
  const type = schema && schema.type;
  const prompt = (schema && schema.prompt) || null;
  if (values && typeof values === "object" && "value" in values) {
    const v = values.value;
    if (type === "confirm") return [[prompt || "Answer", v ? schema.confirmLabel || "Confirm" : schema.cancelLabel || "Cancel"]];
    if (type === "rating") return [[prompt || "Rating", `${text(v)} / ${schema.max || 5}`]];
    return [[prompt || (type === "select" ? "Choice" : "Answer"), text(v)]];
  }
  const given = values && typeof values.values === "object" && values.values !== null ? values.values : values || {};
  const fields = (type === "form" && schema.fields) || [];
  const named = new Set(fields.map((f) => f.name));
  return [
    ...fields.filter((f) => f.name in given).map((f) => [f.label || f.name, text(given[f.name])]),
    ...Object.keys(given).filter((k) => !named.has(k)).map((k) => [k, text(given[k])]),
  ];
}
