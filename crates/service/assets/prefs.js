// The preferences panel: the eight settings of the config file, saved through the server
// (config-ssot: file lock, validation, atomic replace), kept in sync with the file on disk by
// the server's `settings` events. The server validates; its errors appear beside the field.

import { json, parseJson } from "./api.js";

const $ = (id) => document.getElementById(id);

export class Preferences {
  constructor() {
    this.built = false;
    this.dirty = new Set();
    $("prefs-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
  }

  start() {
    const events = new EventSource("/v1/settings/events");
    events.addEventListener("settings", (e) => {
      const snapshot = parseJson(e.data);
      if (snapshot) this.show(snapshot);
      else $("prefs-status").textContent = "The server sent settings that are not JSON.";
    });
    events.addEventListener("error", () => {
      if (!this.built) $("prefs-status").textContent = "no preferences: the server has no settings file";
    });
  }

  build(fields) {
    const box = $("prefs-fields");
    box.replaceChildren();
    for (const f of fields) {
      const row = document.createElement("div");
      row.className = "field";
      row.dataset.key = f.key;
      const label = document.createElement("label");
      label.htmlFor = `pref-${f.key}`;
      label.textContent = f.key;
      const type = document.createElement("span");
      type.className = "type";
      type.textContent = f.type;
      label.append(" ", type);
      let input;
      if (f.type === "boolean") {
        input = document.createElement("input");
        input.type = "checkbox";
      } else {
        input = document.createElement("input");
        input.type = "text";
        if (f.type !== "string") input.inputMode = f.type === "integer" ? "numeric" : "decimal";
      }
      input.id = `pref-${f.key}`;
      input.name = f.key;
      input.dataset.type = f.type;
      input.setAttribute("aria-describedby", `hint-${f.key} err-${f.key}`);
      input.addEventListener("input", () => this.dirty.add(f.key));
      input.addEventListener("change", () => this.dirty.add(f.key));
      const hint = document.createElement("div");
      hint.className = "hint";
      hint.id = `hint-${f.key}`;
      hint.textContent = `${f.hint} (default ${JSON.stringify(f.default)})`;
      const error = document.createElement("div");
      error.className = "field-error";
      error.id = `err-${f.key}`;
      error.setAttribute("role", "alert");
      row.append(label, input, hint, error);
      if (f.key === "adaptive_compaction_min_turns") {
        const warning = document.createElement("div");
        warning.className = "field-warning";
        warning.id = "clamp-warning";
        warning.hidden = true;
        row.append(warning);
      }
      box.append(row);
    }
    this.built = true;
  }

  /** A `settings` snapshot: the file's values (fields being edited keep what was typed). */
  show(snapshot) {
    if (!this.built) this.build(snapshot.fields);
    $("prefs-path").textContent = `File: ${snapshot.path}`;
    for (const [key, value] of Object.entries(snapshot.settings)) {
      const input = $(`pref-${key}`);
      if (!input || this.dirty.has(key)) continue;
      if (input.type === "checkbox") input.checked = Boolean(value);
      else input.value = String(value);
      input.dataset.saved = String(value);
    }
    const warning = $("clamp-warning");
    warning.hidden = !snapshot.clamp_warning;
    warning.textContent = snapshot.clamp_warning || "";
    const problem = $("prefs-problem");
    problem.hidden = !snapshot.problem;
    problem.textContent = snapshot.problem
      ? `The file on disk cannot be used; the engine keeps the last good settings. ${snapshot.problem}`
      : "";
    if (snapshot.changed_by === "file") {
      $("prefs-status").textContent = `Updated from the file on disk at ${new Date().toLocaleTimeString("en-GB")}.`;
    }
  }

  async save() {
    const body = {};
    for (const input of document.querySelectorAll("#prefs-fields input")) {
      body[input.name] = input.type === "checkbox" ? input.checked : input.value;
    }
    for (const e of document.querySelectorAll(".field-error")) e.textContent = "";
    for (const row of document.querySelectorAll(".field")) row.classList.remove("invalid");
    try {
      const snapshot = await json("/v1/settings", { method: "PUT", body: JSON.stringify(body) });
      this.dirty.clear();
      this.show(snapshot);
      $("prefs-status").textContent = "Saved to the file; the next turn uses these settings.";
    } catch (error) {
      const target = error.field && $(`err-${error.field}`);
      if (target) {
        target.textContent = error.message;
        target.closest(".field").classList.add("invalid");
        $(`pref-${error.field}`).focus();
        $("prefs-status").textContent = "Not saved: the file was left untouched.";
      } else {
        $("prefs-status").textContent = `Not saved: ${error.message}`;
      }
    }
  }
}
