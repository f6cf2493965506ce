// The chat panel: the open session's whole conversation (every turn, folded ones collapsed
// under the summary that holds them), the streamed replies, and after each turn the badge of
// its post-turn evaluation (from the session's `compaction` events) and the next prompt's
// tokens. Every request can fail: a failure is shown where it happened, never thrown away.

import { json, jsonWithEtag, parseJson, postSse, sessionPath } from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { turnSpan } from "./drawer.js";

const $ = (id) => document.getElementById(id);

const turns = (n) => `${n} turn${n === 1 ? "" : "s"}`;
const TITLE_KEY = "page:title";

/** The badge's words for one evaluation report; `compacted`: the session has a compaction. */
export function badgeText(report, compacted = false) {
  const o = report.outcome;
  if (!o) return "failed open: the evaluation passed its deadline";
  const p = typeof o.probability === "number" ? ` p=${o.probability.toFixed(2)}` : "";
  switch (o.outcome) {
    case "fast-exit":
    case "nothing-to-compact":
      // The gate counts the turns completed since the last compaction: say so once there is one.
      return compacted && /completed turn/.test(o.detail)
        ? `exit (${o.detail} since the last compaction)`
        : `exit (${o.detail})`;
    case "continue":
      return o.failure ? `failed open: ${o.failure.message || o.detail}` : `CONTINUE${p}`;
    case "compressed":
      return `COMPRESS folded ${turns(o.slice_turns)}`;
    case "forced":
      return `COMPRESS folded ${turns(o.slice_turns)} (backstop)`;
    case "shadowed":
      return `SHADOW${p}`;
    default:
      return `failed open: ${(o.failure && o.failure.message) || o.detail}`;
  }
}

function badgeKind(report) {
  const o = report.outcome;
  if (!o) return "failed";
  if (o.outcome === "compressed" || o.outcome === "forced") return "compress";
  if (o.outcome === "continue" && !o.failure) return "continue";
  if (o.outcome === "fast-exit" || o.outcome === "nothing-to-compact") return "exit";
  if (o.outcome === "shadowed") return "continue";
  return "failed";
}

const same = (a, b) => a && b && a.app === b.app && a.user === b.user && a.id === b.id;

/** The session named by the address (`#/app/user/id`), or null. */
export function sessionFromHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (parts.length !== 3 || parts.some((p) => !p)) return null;
  try {
    const [app, user, id] = parts.map(decodeURIComponent);
    return { app, user, id };
  } catch (_) {
    return null;
  }
}

const hashOf = (s) => `#/${[s.app, s.user, s.id].map(encodeURIComponent).join("/")}`;

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

export class Chat {
  constructor({ onTurnEvaluated, onSessionChanged }) {
    this.session = null;
    this.events = null;
    this.compacted = false;
    this.byTurn = new Map(); // turn id -> assistant message element
    this.reports = new Map(); // turn id -> report that arrived before its `done`
    this.onTurnEvaluated = onTurnEvaluated;
    this.onSessionChanged = onSessionChanged;
    const input = $("input");
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    $("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    $("new-session").addEventListener("click", () => this.newSession().catch((e) => this.problem(e)));
    $("rename-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.rename($("rename-input").value).catch((err) => this.problem(err));
    });
    window.addEventListener("hashchange", () => {
      const s = sessionFromHash();
      if (s && !same(s, this.session)) this.open(s).catch((e) => this.problem(e));
    });
  }

  /** Shows a failure above the conversation. */
  problem(error) {
    const p = $("chat-problem");
    p.textContent = error.message || String(error);
    p.hidden = false;
  }

  async loadSessions() {
    let sessions;
    try {
      ({ sessions } = await json("/v1/sessions"));
    } catch (e) {
      this.problem(e);
      return;
    }
    const list = $("session-list");
    list.replaceChildren();
    if (!sessions.length) list.append(el("li", "muted", "No sessions yet."));
    for (const s of sessions) {
      const li = document.createElement("li");
      const b = el("button", "session", s.title || s.id);
      b.type = "button";
      b.title = `${s.app} / ${s.user} / ${s.id}`;
      if (s.last_activity) {
        const when = new Date(s.last_activity * 1000);
        b.append(el("span", "when", when.toLocaleString("en-GB", { dateStyle: "short", timeStyle: "short" })));
      }
      if (same(this.session, s)) {
        b.setAttribute("aria-current", "true");
        if (s.title) $("session-title").textContent = s.title;
      }
      b.addEventListener("click", () => this.open(s).catch((e) => this.problem(e)));
      li.append(b);
      list.append(li);
    }
  }

  async newSession() {
    const s = await json("/v1/sessions", {
      method: "POST",
      body: JSON.stringify({ app: "page", user: "local" }),
    });
    await this.open({ app: s.app, user: s.user, id: s.id }, true);
  }

  /** Shows `session` (and puts it in the address): its whole conversation and its events. */
  async open(session, fresh = false) {
    this.session = session;
    this.compacted = false;
    this.byTurn.clear();
    this.reports.clear();
    if (location.hash !== hashOf(session)) location.hash = hashOf(session);
    if (this.events) this.events.close();
    const events = new EventSource(`${sessionPath(session)}/events`);
    this.events = events;
    events.addEventListener("compaction", (e) => {
      const report = parseJson(e.data);
      if (report) this.evaluated(report);
    });
    // Subscribed before the first turn can end: its report is not missed.
    const subscribed = new Promise((resolve) => {
      events.addEventListener("open", resolve, { once: true });
      events.addEventListener("error", resolve, { once: true });
    });
    $("chat-problem").hidden = true;
    $("empty-state").hidden = true;
    $("session-head").hidden = false;
    $("session-title").textContent = session.title || `Session ${session.id}`;
    $("messages").replaceChildren();
    $("tokens-line").textContent = "";
    if (fresh) {
      await subscribed;
      this.showEmpty();
    } else await this.showHistory(session);
    if (!same(this.session, session)) return;
    this.onSessionChanged(session);
    this.loadSessions();
  }

  /** The newest page of the session's turns, the live summary where it sits, and the title. */
  async showHistory(session, before = null) {
    const path = sessionPath(session);
    const query = before ? `?before=${before}&limit=50` : "?limit=50";
    const [history, { body: data }] = await Promise.all([json(`${path}/history${query}`), jsonWithEtag(path)]);
    if (!same(this.session, session)) return;
    this.compacted = history.compactions.length > 0;
    if (history.title) $("session-title").textContent = history.title;
    const summary = data.context.find((e) => e.kind === "summary");
    const frag = document.createDocumentFragment();
    if (history.earlier) {
      const more = el("button", "earlier", `Show earlier turns (1–${history.earlier - 1})`);
      more.type = "button";
      more.addEventListener("click", () => {
        more.remove();
        this.showHistory(session, history.earlier).catch((e) => this.problem(e));
      });
      frag.append(el("li", "msg earlier-row"));
      frag.lastChild.append(more);
    }
    if (!before && !history.turns.length) this.showEmpty();
    const lastFolded = Math.max(0, ...history.turns.filter((t) => t.covered_by).map((t) => t.turn));
    for (const turn of history.turns) {
      frag.append(this.turnItem(turn));
      if (summary && turn.turn === lastFolded && !before) frag.append(this.summaryItem(summary, history));
    }
    if (before) $("messages").prepend(frag);
    else $("messages").append(frag);
    if (!before) $("messages").lastElementChild?.scrollIntoView({ block: "end" });
  }

  /** One turn: its messages, inside a collapsed <details> when a summary folds it. */
  turnItem(turn) {
    const messages = turn.events.map((e) => this.message(e.author === "user" ? "user" : "assistant", e.text));
    if (!turn.covered_by) {
      const frag = document.createDocumentFragment();
      frag.append(...messages);
      return frag;
    }
    const li = el("li", "msg folded");
    li.dataset.turn = turn.turn;
    const details = el("details", "folded-turn");
    const head = el("summary", "", `Turn ${turn.turn} · in summary #${turn.summary}`);
    head.append(el("span", "preview", ` — ${turn.events[0].text.slice(0, 80)}`));
    const list = el("ol", "folded-messages");
    list.append(...messages);
    details.append(head, list);
    li.append(details);
    return li;
  }

  summaryItem(summary, history) {
    const li = el("li", "msg summary");
    const live = history.compactions.find((c) => c.event_id === summary.event_id);
    const who = live
      ? `rolling summary #${live.number} (${turnSpan(live)})`
      : "rolling summary";
    const body = el("div", "text markdown");
    body.append(renderMarkdown(summary.text));
    li.append(el("div", "who", who), body);
    return li;
  }

  message(role, text) {
    const li = el("li", `msg ${role}`);
    li.append(el("div", "who", role === "user" ? "you" : "coordinator"), el("div", "text", text));
    return li;
  }

  /** What an empty conversation says to do. */
  showEmpty() {
    $("messages").append(el("li", "msg empty muted", "No turns yet: ask your first question below."));
  }

  add(role, text) {
    for (const empty of document.querySelectorAll("#messages li.empty")) empty.remove();
    const li = this.message(role, text);
    $("messages").append(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  async rename(title) {
    if (!this.session || !title.trim()) return;
    const session = this.session;
    const { etag } = await jsonWithEtag(sessionPath(session));
    await json(`${sessionPath(session)}/events`, {
      method: "POST",
      headers: { "if-match": etag },
      // Scoped: the coordinator never sees it; the store still applies its state delta.
      body: JSON.stringify({
        author: "page",
        isolation_scope: "page",
        actions: { state_delta: { [TITLE_KEY]: title.trim() } },
      }),
    });
    $("session-title").textContent = title.trim();
    $("rename-input").value = "";
    await this.loadSessions();
  }

  async submit() {
    const input = $("input");
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    // The textarea is never disabled: the next message can be typed (and sent) at once.
    try {
      await this.send(text);
    } catch (e) {
      this.problem(e);
    }
  }

  async send(text) {
    if (!this.session) await this.newSession();
    const session = this.session;
    const asked = this.add("user", text);
    const li = this.add("assistant", "");
    const body = li.querySelector(".text");
    li.classList.add("streaming");
    li.setAttribute("aria-busy", "true");
    let finished = false;
    try {
      await postSse(`${sessionPath(session)}/chat`, { message: text }, (name, data) => {
        if (name === "delta") {
          const list = $("messages");
          const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
          body.textContent += data;
          if (atEnd) li.scrollIntoView({ block: "end" });
        } else if (name === "done") {
          finished = true;
          const done = parseJson(data) || {};
          li.dataset.turnId = done.invocation_id;
          li.dataset.turn = done.turn;
          this.badge(li, "evaluating…", "pending");
          this.byTurn.set(done.invocation_id, li);
          const early = this.reports.get(done.invocation_id);
          if (early) this.evaluated(early);
        } else if (name === "error") {
          finished = true;
          const error = parseJson(data);
          this.badge(li, `error: ${(error && error.message) || data}`, "failed");
        }
      });
      if (!finished) throw new Error("the reply ended before it was complete");
    } catch (e) {
      this.failed(li, asked, text, e);
    } finally {
      li.classList.remove("streaming");
      li.removeAttribute("aria-busy");
    }
    if (finished) this.loadSessions();
  }

  /** Marks a reply that broke off: its partial text stays, with the reason and a Retry. */
  failed(li, asked, text, error) {
    li.classList.add("failed");
    this.badge(li, `failed: ${error.message || error}`, "failed");
    const retry = el("button", "retry", "Retry");
    retry.type = "button";
    retry.addEventListener("click", () => {
      asked.remove();
      li.remove();
      this.send(text).catch((e) => this.problem(e));
    });
    li.append(retry);
  }

  badge(li, text, kind) {
    let badge = li.querySelector(".badge");
    if (!badge) {
      badge = document.createElement("span");
      li.append(badge);
    }
    badge.className = `badge ${kind}`;
    badge.textContent = text;
    if (li === $("messages").lastElementChild) li.scrollIntoView({ block: "end" });
  }

  evaluated(report) {
    const li = this.byTurn.get(report.turn_id);
    if (!li) {
      this.reports.set(report.turn_id, report);
      return;
    }
    this.reports.delete(report.turn_id);
    this.badge(li, badgeText(report, this.compacted), badgeKind(report));
    const o = report.outcome;
    if (o && (o.outcome === "compressed" || o.outcome === "forced")) this.compacted = true;
    this.onTurnEvaluated(this.session);
  }

  /** The line under the conversation: the next prompt's tokens with and without compaction. */
  showTokens(tokens) {
    const n = (x) => Number(x).toLocaleString("en-US");
    const { with: w, without } = tokens.next;
    const saved = without - w;
    $("tokens-line").textContent =
      `Next prompt: ${n(w)} tokens with compaction, ${n(without)} without` +
      (saved > 0 ? ` (saves ${n(saved)})` : "");
  }
}
