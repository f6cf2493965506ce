// The chat panel: sessions, the streamed replies, and after each turn the badge of its
// post-turn evaluation (from the session's `compaction` events) and the next prompt's tokens.

import { json, postSse, sessionPath } from "./api.js";

const $ = (id) => document.getElementById(id);

const turns = (n) => `${n} turn${n === 1 ? "" : "s"}`;

/** The badge's words for one evaluation report (`GET .../events`, event `compaction`). */
export function badgeText(report) {
  const o = report.outcome;
  if (!o) return "failed open: the evaluation passed its deadline";
  const p = typeof o.probability === "number" ? ` p=${o.probability.toFixed(2)}` : "";
  switch (o.outcome) {
    case "fast-exit":
    case "nothing-to-compact":
      return `exit (${o.detail})`;
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

export class Chat {
  constructor({ onTurnEvaluated, onSessionChanged }) {
    this.session = null;
    this.events = null;
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
    $("new-session").addEventListener("click", () => this.newSession());
  }

  async loadSessions() {
    const { sessions } = await json("/v1/sessions");
    const list = $("session-list");
    list.replaceChildren();
    for (const s of sessions) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = s.id;
      b.title = `${s.app} / ${s.user} / ${s.id}`;
      if (this.session && this.session.id === s.id && this.session.app === s.app && this.session.user === s.user) {
        b.setAttribute("aria-current", "true");
      }
      b.addEventListener("click", () => this.open(s));
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
    await this.loadSessions();
  }

  /** Shows `session`: its assembled context as the conversation so far, and its events. */
  async open(session, fresh = false) {
    this.session = session;
    this.byTurn.clear();
    this.reports.clear();
    if (this.events) this.events.close();
    this.events = new EventSource(`${sessionPath(session)}/events`);
    this.events.addEventListener("compaction", (e) => this.evaluated(JSON.parse(e.data)));
    $("session-title").textContent = `Session ${session.id}`;
    $("session-title").classList.remove("muted");
    $("messages").replaceChildren();
    $("tokens-line").textContent = "";
    if (!fresh) {
      const data = await json(sessionPath(session));
      for (const entry of data.context) {
        if (entry.kind === "summary") this.add("summary", entry.text);
        else this.add(entry.author === "user" ? "user" : "assistant", entry.text);
      }
    }
    this.onSessionChanged(session);
    this.loadSessions();
  }

  add(role, text) {
    const li = document.createElement("li");
    li.className = `msg ${role}`;
    const who = document.createElement("div");
    who.className = "who";
    who.textContent = role === "summary" ? "rolling summary" : role === "user" ? "you" : "coordinator";
    const body = document.createElement("div");
    body.className = "text";
    body.textContent = text;
    li.append(who, body);
    $("messages").append(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  submit() {
    const input = $("input");
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    // The textarea is never disabled: the next message can be typed (and sent) at once.
    this.send(text);
  }

  async send(text) {
    if (!this.session) await this.newSession();
    const session = this.session;
    this.add("user", text);
    const li = this.add("assistant", "");
    const body = li.querySelector(".text");
    li.classList.add("streaming");
    li.setAttribute("aria-busy", "true");
    await postSse(`${sessionPath(session)}/chat`, { message: text }, (name, data) => {
      if (name === "delta") {
        const list = $("messages");
        const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
        body.textContent += data;
        if (atEnd) li.scrollIntoView({ block: "end" });
      } else if (name === "done") {
        const done = JSON.parse(data);
        li.dataset.turnId = done.invocation_id;
        li.dataset.turn = done.turn;
        this.badge(li, "evaluating…", "pending");
        this.byTurn.set(done.invocation_id, li);
        const early = this.reports.get(done.invocation_id);
        if (early) this.evaluated(early);
      } else if (name === "error") {
        const message = JSON.parse(data).message;
        this.badge(li, `error: ${message}`, "failed");
      }
    });
    li.classList.remove("streaming");
    li.removeAttribute("aria-busy");
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
    this.badge(li, badgeText(report), badgeKind(report));
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
