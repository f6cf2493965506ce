// The page's entry: the chat, the context drawer and the preferences, wired together. The
// open session lives in the address (`#/app/user/id`): a reload or back/forward reopens it.

import { json, sessionPath } from "./api.js";
import { Chat, sessionFromHash } from "./chat.js";
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
  // Each panel opens at its top, whatever the previous one was scrolled to.
  $("drawer").scrollTop = 0;
  if (open === "context" && chat.session) refresh(chat.session);
}

let refreshes = 0;

/** Reloads what the session's last turn changed: the context, its history, the tokens. Only
 * the latest refresh draws; `#drawer[data-loading]` is set until it has. */
async function refresh(session) {
  const mine = ++refreshes;
  $("drawer").dataset.loading = "true";
  try {
    const path = sessionPath(session);
    const [data, tokens, history] = await Promise.all([
      json(path),
      json(`${path}/tokens`),
      json(`${path}/history?limit=1`),
    ]);
    if (chat.session !== session || mine !== refreshes) return;
    chat.showTokens(tokens);
    renderContext(data, path, history.compactions);
    renderChart(tokens);
  } catch (e) {
    if (chat.session === session && mine === refreshes) {
      $("tokens-line").textContent = `Could not load the context: ${e.message}`;
    }
  } finally {
    if (mine === refreshes) delete $("drawer").dataset.loading;
  }
}

const chat = new Chat({
  onTurnEvaluated: (session) => refresh(session),
  onSessionChanged: (session) => refresh(session),
});
const prefs = new Preferences();

$("tab-context").addEventListener("click", () => showPanel("context"));
$("tab-prefs").addEventListener("click", () => showPanel("prefs"));
wireSearch(() => (chat.session ? sessionPath(chat.session) : null));
const start = sessionFromHash();
(start ? chat.open(start) : chat.loadSessions())
  .catch((e) => chat.problem(e))
  .finally(() => {
    prefs.start();
    document.body.dataset.ready = "true";
  });
