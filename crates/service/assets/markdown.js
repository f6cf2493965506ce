// Markdown to DOM nodes, for text a model wrote (the rolling summary): headings, bullet and
// numbered lists, tables, paragraphs, **strong**, *emphasis* and `code`. It builds elements
// and text nodes only — never innerHTML — so no markup in the text can reach the page.

function el(tag, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  return e;
}

/** `text` with its inline marks as nodes appended to `parent`. */
function inline(parent, text) {
  const pattern = /(\*\*[^*]+\*\*|__[^_]+__|`[^`]+`|\*[^*\s][^*]*\*|_[^_\s][^_]*_)/g;
  let at = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > at) parent.append(document.createTextNode(text.slice(at, m.index)));
    const token = m[0];
    if (token.startsWith("**") || token.startsWith("__")) parent.append(el("strong", token.slice(2, -2)));
    else if (token.startsWith("`")) parent.append(el("code", token.slice(1, -1)));
    else parent.append(el("em", token.slice(1, -1)));
    at = m.index + token.length;
  }
  if (at < text.length) parent.append(document.createTextNode(text.slice(at)));
  return parent;
}

const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
const isRule = (line) => /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line);

function table(lines) {
  const t = el("table");
  const head = el("thead");
  const row = el("tr");
  for (const c of cells(lines[0])) row.append(inline(el("th"), c));
  head.append(row);
  const body = el("tbody");
  for (const line of lines.slice(2)) {
    const tr = el("tr");
    for (const c of cells(line)) tr.append(inline(el("td"), c));
    body.append(tr);
  }
  t.append(head, body);
  return t;
}

/** A fragment of block elements for the Markdown `text`. */
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text || "").replace(/\r\n/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      // Headings inside a summary sit below the page's own (h4 and down).
      out.append(inline(el(`h${Math.min(6, heading[1].length + 3)}`), heading[2]));
      i += 1;
    } else if (line.includes("|") && i + 1 < lines.length && isRule(lines[i + 1])) {
      const block = [line, lines[i + 1]];
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) block.push(lines[i++]);
      out.append(table(block));
    } else if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d+[.)]\s+/.test(line);
      const list = el(ordered ? "ol" : "ul");
      const item = ordered ? /^\s*\d+[.)]\s+/ : /^\s*[-*+]\s+/;
      while (i < lines.length && item.test(lines[i])) {
        list.append(inline(el("li"), lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, "")));
        i += 1;
      }
      out.append(list);
    } else {
      const para = [];
      while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*([-*+]|\d+[.)])\s+)/.test(lines[i])) {
        para.push(lines[i].trim());
        i += 1;
      }
      out.append(inline(el("p"), para.join(" ")));
    }
  }
  return out;
}
