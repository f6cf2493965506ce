// The context drawer: the assembled context for the next turn (the rolling summary, then
// the retained turns), the compaction history with subsumed entries marked (each with its
// receipt — findings kept, corrected, dropped; expandable — and able to show the original
// turns it folded), a search of the session's history (lossless recall), and a chart of
// prompt tokens per turn with and without compaction (inline SVG).

import { json } from "./api.js";
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attributes) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  return e;
}

/** A snippet with its `**matched**` words as <mark> elements (text nodes only). */
function marked(snippet) {
  const text = el("div", "text");
  snippet.split("**").forEach((part, i) => {
    if (i % 2 === 1) text.append(el("mark", "", part));
    else text.append(document.createTextNode(part));
  });
  return text;
}

function where(turn, coveredBy) {
  const at = turn === null ? "before turn 1" : `turn ${turn}`;
  return coveredBy ? `${at} · folded` : `${at} · verbatim in context`;
}

/** Fetches and lists, under `li`, the original events the compaction `eventId` covers. */
async function showOriginal(li, path, eventId, button) {
  button.disabled = true;
  const list = el("ol", "original-turns");
  try {
    const data = await json(`${path}/compactions/${encodeURIComponent(eventId)}/turns`);
    for (const item of data.events) {
      const row = el("li", "original");
      row.append(el("div", "who", `${where(item.turn, item.covered_by)} · ${item.event.author}`), el("div", "text", item.text));
      list.append(row);
    }
    if (!data.events.length) list.append(el("li", "muted", "No events in this range."));
  } catch (error) {
    list.append(el("li", "problem", error.message));
  }
  li.append(list);
  button.remove();
}

/** Searches the session at `path()` for the form's words and lists the hits. */
export function wireSearch(path) {
  $("recall-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const hits = $("recall-hits");
    const status = $("recall-status");
    hits.replaceChildren();
    const at = path();
    if (!at) {
      status.textContent = "Start a conversation first.";
      return;
    }
    const q = $("recall-query").value;
    try {
      const data = await json(`${at}/recall?q=${encodeURIComponent(q)}&limit=20`);
      status.textContent = `${data.hits.length} hit${data.hits.length === 1 ? "" : "s"}`;
      for (const hit of data.hits) {
        const li = el("li", hit.covered_by ? "hit folded" : "hit");
        li.append(el("div", "who", `${where(hit.turn, hit.covered_by)} · ${hit.author}`), marked(hit.snippet));
        hits.append(li);
      }
    } catch (error) {
      status.textContent = error.message;
    }
  });
}

/** "turn 3", "turns 1–4" or "no turns": what a compaction folded. */
export function turnSpan(c) {
  if (!c.first_turn) return "no turns";
  return c.first_turn === c.last_turn ? `turn ${c.first_turn}` : `turns ${c.first_turn}–${c.last_turn}`;
}

/** The context for the next turn (the summary rendered as Markdown) and the compaction
 * history by turn numbers and tokens saved (`compactions` from the history route). */
export function renderContext(session, path, compactions) {
  const entries = $("context-entries");
  entries.replaceChildren();
  for (const entry of session.context) {
    if (entry.kind === "summary") {
      const li = el("li", "entry summary");
      const text = el("div", "text markdown");
      text.append(renderMarkdown(entry.text));
      li.append(el("div", "who", "rolling summary"), text);
      entries.append(li);
    } else {
      const li = el("li", "entry");
      li.append(el("div", "who", entry.author), el("div", "text", entry.text));
      entries.append(li);
    }
  }
  if (!session.context.length) entries.append(el("li", "muted", "Nothing yet: send a question."));
  const history = $("history");
  history.replaceChildren();
  const n = (x) => Number(x).toLocaleString("en-US");
  for (const c of compactions) {
    const li = el("li", c.subsumed ? "compaction subsumed" : "compaction live");
    const span = turnSpan(c);
    const saved = c.covered_tokens - c.summary_tokens;
    li.append(
      el("span", "label", c.subsumed ? "subsumed" : "live"),
      el("span", "", ` #${c.number}: ${span} folded, ${n(c.covered_tokens)} → ${n(c.summary_tokens)} tokens` +
        (saved > 0 ? ` (saves ${n(saved)})` : "")),
    );
    const receipt = receiptNode(c.receipt);
    if (receipt) li.append(receipt);
    const show = el("button", "show-turns", "show the original turns");
    show.type = "button";
    show.addEventListener("click", () => showOriginal(li, path, c.event_id, show));
    li.append(show);
    history.append(li);
  }
  if (!compactions.length) history.append(el("li", "muted", "No compaction yet."));
}

/** A compaction's receipt: "12 findings kept, 1 corrected, 0 dropped", expandable to each
 * correction (what was said → what it became, with its turn) and each dropped finding. */
function receiptNode(receipt) {
  if (!receipt) return null;
  const corrected = receipt.corrected || [];
  const dropped = receipt.dropped || [];
  const details = el("details", "receipt");
  const plural = receipt.kept === 1 ? "" : "s";
  details.append(el("summary", "", `${receipt.kept} finding${plural} kept, ${corrected.length} corrected, ${dropped.length} dropped`));
  const list = el("ul", "receipt-items");
  for (const c of corrected) {
    const turn = typeof c.turn === "number" ? ` (turn ${c.turn})` : "";
    list.append(el("li", "corrected", `corrected${turn}: ${c.was} → ${c.now}`));
  }
  for (const d of dropped) list.append(el("li", "dropped", `dropped (${d.reason}): ${d.finding}`));
  if (!corrected.length && !dropped.length) list.append(el("li", "muted", "Nothing corrected or dropped."));
  details.append(list);
  return details;
}

/** Two polylines over the turns: the prompt tokens sent (with) and those the whole history would need (without). */
export function renderChart(tokens) {
  const box = $("token-chart");
  box.replaceChildren();
  const turns = tokens.turns.filter((t) => typeof t.with === "number");
  if (!turns.length) {
    box.append(el("p", "muted", "No completed turn yet."));
    return;
  }
  const width = 340, height = 150, left = 44, bottom = 22, top = 8, right = 8;
  const max = Math.max(1, ...turns.map((t) => Math.max(t.with, t.without)));
  const x = (i) => left + (turns.length === 1 ? 0 : (i * (width - left - right)) / (turns.length - 1));
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": "Prompt tokens per turn with and without compaction",
    class: "chart-svg",
  });
  chart.append(svg("line", { x1: left, y1: y(0), x2: width - right, y2: y(0), class: "axis" }));
  chart.append(svg("line", { x1: left, y1: top, x2: left, y2: y(0), class: "axis" }));
  const label = (text, attributes) => {
    const t = svg("text", attributes);
    t.textContent = text;
    chart.append(t);
  };
  label(max.toLocaleString("en-US"), { x: left - 4, y: top + 8, "text-anchor": "end", class: "tick" });
  label("0", { x: left - 4, y: y(0), "text-anchor": "end", class: "tick" });
  turns.forEach((t, i) => label(String(t.turn), { x: x(i), y: height - 6, "text-anchor": "middle", class: "tick" }));
  for (const [key, className] of [["without", "without"], ["with", "with"]]) {
    const points = turns.map((t, i) => `${x(i)},${y(t[key])}`).join(" ");
    chart.append(svg("polyline", { points, class: `series ${className}` }));
    turns.forEach((t, i) => chart.append(svg("circle", { cx: x(i), cy: y(t[key]), r: 2.5, class: `dot ${className}` })));
  }
  box.append(chart);
}
