// A small, safe Markdown renderer: it builds DOM nodes (never HTML strings), so nothing
// an agent writes can become markup. Links keep only http(s) and mailto targets; images
// only data: URLs of raster images (the page may load nothing from elsewhere). Raw HTML in
// the text is shown as text.

import { h } from "./dom.js";

const SAFE_LINK = /^(https?:|mailto:)/i;
const SAFE_IMAGE = /^data:image\/(png|jpe?g|gif|webp);base64,[a-z0-9+/=\s]+$/i;

export function renderMarkdown(text) {
  const root = h("div", { class: "markdown" });
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      root.append(h("pre", {}, h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"))));
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      root.append(h(`h${heading[1].length}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(h("hr", {})); i++; continue; }
    if (/^\s*>/.test(line)) {
      const body = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) body.push(lines[i++].replace(/^\s*>\s?/, ""));
      const quote = renderMarkdown(body.join("\n"));
      root.append(h("blockquote", {}, [...quote.childNodes]));
      continue;
    }
    const bullet = /^\s*([-*+]|\d{1,9}[.)])\s+/;
    if (bullet.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul", {});
      while (i < lines.length && bullet.test(lines[i])) {
        let item = lines[i++].replace(bullet, "");
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !bullet.test(lines[i])) item += " " + lines[i++].trim();
        const task = item.match(/^\[([ xX])\]\s+(.*)$/);
        if (task) {
          list.append(h("li", {}, h("input", { type: "checkbox", disabled: true, checked: task[1] !== " " }), " ", inline(task[2])));
        } else {
          list.append(h("li", {}, inline(item)));
        }
      }
      root.append(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/.test(lines[i + 1])) {
      const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
      const head = cells(line);
      i += 2;
      const body = [];
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) body.push(cells(lines[i++]));
      root.append(h("table", {},
        h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, inline(c))))),
        h("tbody", {}, body.map((r) => h("tr", {}, r.map((c) => h("td", {}, inline(c))))))));
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*>|\s*```|\s*~~~)/.test(lines[i]) && !bullet.test(lines[i])) {
      para.push(lines[i++].trim());
    }
    if (!para.length) para.push(lines[i++].trim());
    root.append(h("p", {}, inline(para.join("\n"))));
  }
  return root;
}

// Inline spans: code, images, links, bold, italic, hard line breaks.
const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|!\[([^\]]*)\]\(\s*([^)\s]+)\s*\)|\[([^\]]+)\]\(\s*([^)\s]+)\s*\)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\*([^*\s][^*]*?)\*|\b_([^_\s][^_]*?)_\b|~~([\s\S]+?)~~|<(https?:\/\/[^>\s]+)>/;

export function inline(text) {
  const out = [];
  let rest = String(text);
  while (rest) {
    const m = rest.match(INLINE);
    if (!m) { out.push(...breaks(rest)); break; }
    if (m.index > 0) out.push(...breaks(rest.slice(0, m.index)));
    rest = rest.slice(m.index + m[0].length);
    if (m[1]) out.push(h("code", {}, m[2]));
    else if (m[4] !== undefined) {
      out.push(SAFE_IMAGE.test(m[4]) ? h("img", { src: m[4], alt: m[3] }) : h("span", { class: "muted" }, `[image: ${m[3] || "not shown"}]`));
    } else if (m[6] !== undefined) {
      out.push(SAFE_LINK.test(m[6])
        ? h("a", { href: m[6], target: "_blank", rel: "noopener noreferrer" }, inline(m[5]))
        : h("span", {}, inline(m[5])));
    } else if (m[7] !== undefined || m[8] !== undefined) out.push(h("strong", {}, inline(m[7] ?? m[8])));
    else if (m[9] !== undefined || m[10] !== undefined) out.push(h("em", {}, inline(m[9] ?? m[10])));
    else if (m[11] !== undefined) out.push(h("del", {}, inline(m[11])));
    else if (m[12] !== undefined) out.push(h("a", { href: m[12], target: "_blank", rel: "noopener noreferrer" }, m[12]));
  }
  return out;
}

function breaks(text) {
  const parts = text.split(/ {2,}\n|\\\n/);
  const out = [];
  parts.forEach((part, n) => {
    if (n) out.push(h("br", {}));
    out.push(part.replace(/\n/g, " "));
  });
  return out;
}
