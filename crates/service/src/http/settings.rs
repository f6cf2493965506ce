//! The preferences API over config-ssot: `GET /v1/settings`, `PUT /v1/settings` and
//! `GET /v1/settings/events` (SSE `settings` events).
//!
//! The settings file is the single source of truth (spec sections 1.8 and 10). A save goes
//! through [`ConfigStore::set_many`] (the file lock, validation, atomic replace); a change
//! made by anyone else (`compaction config set`, the desktop app, a Python `filelock` writer)
//! is found by config-ssot's [`config_ssot::Watcher`], polled every
//! [`config_ssot::DEFAULT_POLL_INTERVAL`] on a thread of its own. Either way the server then
//! (1) makes the lanes evaluate with the same engine on the new settings from the next
//! evaluation on ([`compaction_core::Engine::with_settings`]), and (2) sends a `settings`
//! event to every open page. Validation errors are config-ssot's, word for word, with the key
//! they are about ([`ConfigError::key`]).
//!
//! Adapter keys (`decision_adapter`, endpoints) are read at start only: a change to them needs
//! a restart; the eight spec keys apply at once.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};

use compaction_core::Settings;
use compaction_core::{KEYS, key_hint};
use config_ssot::{ConfigError, ConfigFile, ConfigStore, DEFAULT_POLL_INTERVAL, WatchEvent};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::lane::Lanes;

/// The JSON type of each key, read off its default (as config-ssot reads it).
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        _ => "string",
    }
}

/// The eight keys in spec order, each with its type, default and hint.
fn fields() -> Vec<Value> {
    let defaults = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    KEYS.iter()
        .map(|key| {
            let default = defaults.get(*key).cloned().unwrap_or(Value::Null);
            json!({
                "key": key,
                "type": json_kind(&default),
                "default": default,
                "hint": key_hint(key),
            })
        })
        .collect()
}

/// The settings as the page shows them.
struct Current {
    file: ConfigFile,
    /// Why the file on disk cannot be used now (the last good settings stay in force).
    problem: Option<String>,
}

/// The settings file, watched, and the page's view of it.
pub(super) struct SettingsHub {
    store: ConfigStore,
    lanes: Lanes,
    current: Mutex<Current>,
    events: broadcast::Sender<Arc<Value>>,
    /// Dropped with the hub: the watcher thread stops at its next poll.
    _stop: mpsc::Sender<()>,
}

impl SettingsHub {
    /// Loads the file (creating or backfilling it, as config-ssot does at start), makes the
    /// lanes run on its settings, and starts watching it.
    pub(super) fn start(store: ConfigStore, lanes: Lanes) -> Result<Arc<SettingsHub>, ConfigError> {
        let file = store.load()?;
        let engine = lanes
            .engine()
            .with_settings(file.settings().clone())
            .map_err(|source| ConfigError::Invalid {
                path: file.path().to_owned(),
                source,
            })?;
        lanes.set_engine(Arc::new(engine));
        let mut watcher = store.watch_from(&file);
        let (stop, stopped) = mpsc::channel::<()>();
        let hub = Arc::new(SettingsHub {
            store,
            lanes,
            current: Mutex::new(Current {
                file,
                problem: None,
            }),
            events: broadcast::channel(64).0,
            _stop: stop,
        });
        let weak: Weak<SettingsHub> = Arc::downgrade(&hub);
        std::thread::Builder::new()
            .name("settings-watch".to_owned())
            .spawn(move || {
                loop {
                    if let Some(event) = watcher.poll() {
                        let Some(hub) = weak.upgrade() else { return };
                        match event {
                            WatchEvent::Changed(file) => hub.apply(*file, "file"),
                            WatchEvent::Rejected(error) => hub.reject(&error),
                            _ => {}
                        }
                    }
                    match stopped.recv_timeout(DEFAULT_POLL_INTERVAL) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            })
            .map_err(|source| ConfigError::Io {
                path: hub.store.path().file().to_owned(),
                action: "start the settings watcher thread",
                source,
            })?;
        Ok(hub)
    }

    /// The page's view now (`changed_by`: `start`, `page` or `file`).
    pub(super) fn snapshot(&self, changed_by: &str) -> Value {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        snapshot(&current, changed_by)
    }

    /// Every later change, as the JSON of a `settings` event.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<Value>> {
        self.events.subscribe()
    }

    /// Saves typed values (key → text) through config-ssot, then applies them.
    pub(super) fn save(&self, pairs: &[(String, String)]) -> Result<Value, ConfigError> {
        let file = self
            .store
            .set_many(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
        self.apply(file, "page");
        Ok(self.snapshot("page"))
    }

    /// New valid settings: the next evaluation runs on them, and every page hears of it. The
    /// watcher reporting the page's own save again changes nothing and says nothing.
    fn apply(&self, file: ConfigFile, changed_by: &str) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.file.raw() == file.raw() && current.problem.is_none() {
            return;
        }
        match self.lanes.engine().with_settings(file.settings().clone()) {
            Ok(engine) => {
                self.lanes.set_engine(Arc::new(engine));
                current.file = file;
                current.problem = None;
            }
            // config-ssot validated the file with the same rules, so this does not happen;
            // if it did, the engine keeps the last good settings and the page says why.
            Err(e) => current.problem = Some(e.to_string()),
        }
        tracing::info!(changed_by, "settings applied");
        let _ = self.events.send(Arc::new(snapshot(&current, changed_by)));
    }

    /// The file changed into something unusable: keep the last good settings, say why.
    fn reject(&self, error: &ConfigError) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        tracing::warn!("settings file rejected, keeping the last good settings: {error}");
        current.problem = Some(error.to_string());
        let _ = self.events.send(Arc::new(snapshot(&current, "file")));
    }
}

fn snapshot(current: &Current, changed_by: &str) -> Value {
    let settings = serde_json::to_value(current.file.settings()).unwrap_or(Value::Null);
    json!({
        "path": current.file.path().display().to_string(),
        "settings": settings,
        "fields": fields(),
        // The clamp's own words (compaction-core's `ClampWarning`), as the cli banner shows them.
        "clamp_warning": current.file.effective().clamp_warning.map(|w| w.to_string()),
        "problem": current.problem,
        "changed_by": changed_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_key_has_a_hint_and_a_type() {
        let fields = fields();
        assert_eq!(fields.len(), KEYS.len());
        for field in fields {
            assert!(!field["hint"].as_str().unwrap_or("").is_empty(), "{field}");
        }
        assert_eq!(
            json_kind(&json!(0.75)),
            "number",
            "τ is a number, not an integer"
        );
    }
}
