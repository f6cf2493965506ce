// The page's entry: the chat, the context drawer and the preferences, wired together.

import { json, sessionPath } from "./api.js";
import { Chat } from "./chat.js";
import { renderChart, renderContext, wireSearch } from "./drawer.js";
import { Preferences } from "./prefs.js";

const $ = (id) => document.getElementById(id);

let open = null; // "context" | "prefs" | null

function showPanel(which) {
  open = open === which ? null : which;
  $("drawer").hidden = open === null;
  $("drawer-context").hidden = open !== "context";
  $("drawer-prefs").hidden = open !== "prefs";
  $("tab-context").setAttribute("aria-pressed", String(open === "context"));
  $("tab-prefs").setAttribute("aria-pressed", String(open === "prefs"));
  if (open === "context" && chat.session) refresh(chat.session);
}

/** Reloads what the session's last turn changed: the context, its history, the tokens. */
async function refresh(session) {
  const [data, tokens] = await Promise.all([
    json(sessionPath(session)),
    json(`${sessionPath(session)}/tokens`),
  ]);
  if (chat.session !== session) return;
  chat.showTokens(tokens);
  renderContext(data, sessionPath(session));
  renderChart(tokens);
}

const chat = new Chat({
  onTurnEvaluated: (session) => refresh(session),
  onSessionChanged: (session) => refresh(session),
});
const prefs = new Preferences();

$("tab-context").addEventListener("click", () => showPanel("context"));
$("tab-prefs").addEventListener("click", () => showPanel("prefs"));
wireSearch(() => (chat.session ? sessionPath(chat.session) : null));
chat.loadSessions();
prefs.start();
document.body.dataset.ready = "true";
