// Building the page without innerHTML: every piece of text goes in as a text node.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "value") {
      el.value = value;
    } else if (key === "checked") {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function pill(status) {
  const text = status ?? "-";
  return h("span", { class: `pill s-${text}` }, text.replaceAll("_", " "));
}

export function toast(text, bad = false) {
  const box = document.getElementById("toasts");
  const el = h("div", { class: bad ? "toast bad" : "toast", role: "status" }, text);
  box.append(el);
  setTimeout(() => el.remove(), bad ? 8000 : 3500);
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "-";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function fmtCost(usd) {
  if (usd === null || usd === undefined) return "-";
  return `$${Number(usd).toFixed(usd < 1 ? 4 : 2)}`;
}

export function fmtTime(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

// Calls a handler once per animation frame at most, however many times it is asked.
export function coalesce(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    setTimeout(() => { queued = false; fn(); }, 16);
  };
}
