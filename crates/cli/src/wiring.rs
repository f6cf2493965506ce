//! The composition root's wiring: settings from config-ssot, adapters from settings and the
//! environment, the clock and ids of this process, and telemetry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use compaction_core::{Engine, SessionStore, Settings, Telemetry};
use config_ssot::{ConfigFile, ConfigPath, ConfigStore};
use serde_json::{Map, Value};

use crate::error::{Cause, CliError};
use crate::registry::{AdapterInput, BuiltDecision, BuiltSummarizer, Registry};

/// The adapters chosen and the settings they run on.
pub(crate) struct Wiring {
    /// The validated settings.
    pub(crate) settings: Settings,
    /// The decision model and why it was chosen.
    pub(crate) decision: BuiltDecision,
    /// The summarizer and why it was chosen.
    pub(crate) summarizer: BuiltSummarizer,
    /// Where the settings came from.
    pub(crate) settings_origin: String,
    /// What the settings' reader should know: misspelled-looking keys, spec 3.1's
    /// disambiguation.
    pub(crate) warnings: Vec<String>,
    /// `adaptive_compaction_shadow`: probe and record, never compact.
    pub(crate) shadow: bool,
    /// The engine's deadline for one probe: the decision adapter's own timeout and a margin,
    /// so the adapter reports its timeout first.
    pub(crate) probe_deadline: std::time::Duration,
    /// The engine's deadline for one summary, likewise.
    pub(crate) summarize_deadline: std::time::Duration,
}

impl Wiring {
    /// The first line of output: which models run and why.
    pub(crate) fn banner(&self) -> String {
        let warning: String = self
            .warnings
            .iter()
            .map(|w| format!(" | warning: {w}"))
            .collect();
        let shadow = if self.shadow {
            " | shadow mode: decisions are recorded, nothing is compacted"
        } else {
            ""
        };
        format!(
            "decision model: {} | summarizer: {} | settings: {}{shadow}{warning}",
            self.decision.reason, self.summarizer.reason, self.settings_origin
        )
    }
}

/// Where settings come from.
pub(crate) enum ConfigSource {
    /// The spec's defaults, adapters forced local (the demo's embedded default): the
    /// embedding decision model when its files are installed, else the lexical one.
    EmbeddedOffline,
    /// `--config PATH`, or the resolved default location when a file is there.
    Resolve(Option<PathBuf>),
}

/// Loads the config file (if any) and builds the adapters it names from `registry`.
/// `decision` / `summarizer` override the file's `decision_adapter` / `summarizer_adapter`.
pub(crate) fn wire(
    registry: &Registry,
    source: ConfigSource,
    decision: Option<&str>,
    summarizer: Option<&str>,
) -> Result<Wiring, CliError> {
    let mut warnings = Vec::new();
    let (settings, mut raw, origin) = match source {
        ConfigSource::EmbeddedOffline => {
            let mut raw = Map::new();
            raw.insert(
                decision_client::config::KEY_ADAPTER.into(),
                Value::from("local"),
            );
            raw.insert(
                summarizer::config::KEY_ADAPTER.into(),
                Value::from("offline"),
            );
            (Settings::default(), raw, "spec defaults (demo)".to_owned())
        }
        ConfigSource::Resolve(explicit) => match load_config(explicit, &mut warnings)? {
            Some(file) => {
                for (key, meant) in file.unknown_setting_keys() {
                    warnings.push(format!(
                        "{key} is not a setting (did you mean {meant}?); {meant} keeps its value"
                    ));
                }
                (
                    file.settings().clone(),
                    file.raw().clone(),
                    file.path().display().to_string(),
                )
            }
            None => (
                Settings::default(),
                Map::new(),
                "spec defaults (no config file)".to_owned(),
            ),
        },
    };
    if let Some(choice) = decision {
        raw.insert(
            decision_client::config::KEY_ADAPTER.into(),
            Value::from(choice),
        );
    }
    if let Some(choice) = summarizer {
        raw.insert(summarizer::config::KEY_ADAPTER.into(), Value::from(choice));
    }
    let effective = settings.effective().map_err(CliError::config)?;
    let shadow = compaction_core::shadow_from(&raw).map_err(|e| config_in(&origin, e))?;
    let env = |name: &str| std::env::var(name).ok();
    let input = AdapterInput {
        settings: &effective,
        config: &raw,
        env: &env,
    };
    let in_origin = |e| config_in(&origin, e);
    let decision = registry.build_decision(&input).map_err(in_origin)?;
    let summarizer = registry.build_summarizer(&input).map_err(in_origin)?;
    let margin = std::time::Duration::from_secs(1);
    let probe_deadline = decision.timeout + margin;
    let summarize_deadline = summarizer.timeout + margin;
    Ok(Wiring {
        settings,
        decision,
        summarizer,
        settings_origin: origin,
        shadow,
        probe_deadline,
        summarize_deadline,
        warnings: warnings
            .into_iter()
            .chain(effective.clamp_warning.map(|w| w.to_string()))
            .collect(),
    })
}

/// `--config PATH` is read and must exist (a reading command never creates a file, and a typo
/// is reported, not replaced by defaults); without it the default location is used only when
/// a file already exists there. The file is never written: missing keys take their defaults
/// in memory (only `compaction config show` and `config set` backfill the file). A writer
/// holding the settings lock is waited for at most [`config_ssot::READ_LOCK_WAIT`], saying so
/// on stderr; past that the file is read without the lock and the banner says so.
fn load_config(
    explicit: Option<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<Option<ConfigFile>, CliError> {
    let had_explicit = explicit.is_some();
    let path = ConfigPath::from_env(explicit).map_err(CliError::config)?;
    if !path.file().exists() {
        if had_explicit {
            let shown = shown(path.file());
            return Err(CliError::Config(Cause::new(format!(
                "{shown}: no such config file (create it with the defaults: \
                 compaction config show --config {shown}; or leave out --config)"
            ))));
        }
        return Ok(None);
    }
    let wait = config_ssot::READ_LOCK_WAIT;
    let read = ConfigStore::open(path)
        .read(wait, |lock| {
            eprintln!(
                "waiting up to {} s for the settings lock {} (another process is changing the settings)",
                wait.as_secs(),
                crate::render::for_terminal(&shown(lock))
            );
        })
        .map_err(CliError::config)?;
    if let Some(lock) = read.lock_timed_out {
        warnings.push(format!(
            "the settings lock {} was held for more than {} s; the settings were read without it",
            shown(&lock),
            wait.as_secs()
        ));
    }
    Ok(Some(read.file))
}

/// A configuration error `error` of the config file at `path`.
fn in_config_file(path: &Path, error: impl std::error::Error + Send + Sync + 'static) -> CliError {
    config_in(&shown(path), error)
}

/// A configuration error `error` of the settings from `origin` (a file, or the defaults).
fn config_in(origin: &str, error: impl std::error::Error + Send + Sync + 'static) -> CliError {
    CliError::Config(Cause::with(format!("{origin}: {error}"), error))
}

/// Sets one of the adapters' keys (`decision_adapter`, `summarizer_base_url`,
/// `coordinator_model`, …) in the
/// config file: the value is read as a JSON number or boolean when it is one, otherwise as a
/// string, and checked by the adapter crate's own parser before anything is written. Any other
/// key is refused, naming every settable key.
pub(crate) fn set_adapter_key(
    registry: &Registry,
    store: &ConfigStore,
    key: &str,
    text: &str,
) -> Result<ConfigFile, CliError> {
    let registered = registry.adapter_keys();
    let adapter_keys = registered
        .iter()
        .chain(&service::http::COORDINATOR_KEYS)
        .chain(&compaction_core::EXTENSION_KEYS);
    if !adapter_keys.clone().any(|k| *k == key) {
        let known: Vec<&str> = compaction_core::KEYS
            .iter()
            .chain(adapter_keys)
            .copied()
            .collect();
        return Err(CliError::Config(Cause::new(format!(
            "unknown key {key}; the settable keys are: {}",
            known.join(", ")
        ))));
    }
    let value = match serde_json::from_str::<Value>(text) {
        Ok(v) if v.is_number() || v.is_boolean() => v,
        _ => Value::from(text),
    };
    let file = store.load().map_err(CliError::config)?;
    let mut raw = file.raw().clone();
    raw.insert(key.to_owned(), value.clone());
    // The convention and every built-in parser; an extra adapter checks its own keys when built.
    registry
        .validate(&raw)
        .map_err(|e| in_config_file(file.path(), e))?;
    service::http::CoordinatorConfig::from_map(&raw).map_err(|e| in_config_file(file.path(), e))?;
    compaction_core::shadow_from(&raw).map_err(|e| in_config_file(file.path(), e))?;
    store.set_extra(key, value).map_err(CliError::config)
}

/// The config store `compaction config` works on.
pub(crate) fn config_store(explicit: Option<PathBuf>) -> Result<ConfigStore, CliError> {
    let path = ConfigPath::from_env(explicit).map_err(CliError::config)?;
    Ok(ConfigStore::open(path))
}

/// What the `--otlp*` flags ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OtlpRequest {
    /// `--otlp` or `--otlp-endpoint` was given.
    pub(crate) export: bool,
    /// `--otlp-endpoint URL`.
    pub(crate) endpoint: Option<String>,
    /// `--otlp-project NAME`.
    pub(crate) project: Option<String>,
}

/// The compaction spans' adapter, the exporter's guard (keep it alive; dropping it flushes)
/// and what every span records.
pub(crate) type Spans = (
    Arc<dyn Telemetry>,
    Option<telemetry::TelemetryGuard>,
    telemetry::TelemetryConfig,
);

/// Telemetry: an OTLP exporter when `--otlp`, `--otlp-endpoint` or
/// `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` asks for one, otherwise none (and no network
/// traffic); plus what the spans record (the turn span honours it too).
pub(crate) fn telemetry(otlp: OtlpRequest) -> Result<Spans, CliError> {
    let config = telemetry::TelemetryConfig::from_env().map_err(CliError::config)?;
    let from_env = [telemetry::TRACES_ENDPOINT_ENV, telemetry::ENDPOINT_ENV]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()));
    if !otlp.export && !from_env {
        return Ok((Arc::new(compaction_core::NoTelemetry), None, config));
    }
    let guard = telemetry::OtlpSetup::new()
        .endpoint(otlp.endpoint.as_deref())
        .project_name(otlp.project.as_deref())
        .init()
        .map_err(CliError::config)?;
    Ok((Arc::new(guard.telemetry(config)), Some(guard), config))
}

pub(crate) use service::{ProcessIds, SystemClock, run_id};

/// The engine on `store`, with the adapters, settings and deadlines of `wiring`.
pub(crate) fn build_engine(
    wiring: &Wiring,
    store: Arc<dyn SessionStore>,
    clock: Arc<SystemClock>,
    ids: Arc<ProcessIds>,
    telemetry: Arc<dyn Telemetry>,
) -> Result<Engine, CliError> {
    Engine::builder(
        wiring.decision.model.clone(),
        wiring.summarizer.summarizer.clone(),
        store,
        clock,
        ids,
    )
    .settings(wiring.settings.clone())
    .telemetry(telemetry)
    .shadow(wiring.shadow)
    .probe_deadline(wiring.probe_deadline)
    .summarize_deadline(wiring.summarize_deadline)
    .build()
    .map_err(CliError::config)
}

/// Logs to stderr (filter from `COMPACTION_LOG`, default `error` plus the OTLP exporter's
/// warnings), and, when spans are exported, sends the program's own spans (one per replayed
/// turn) to the same exporter so that the compaction spans nest under their turn.
pub(crate) fn init_logging(guard: Option<&telemetry::TelemetryGuard>) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // By default errors, plus the exporter's one warning about spans that could not be sent.
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("COMPACTION_LOG").unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(format!("error,{}=warn", telemetry::WARNING_TARGET))
        });
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter);
    let registry = tracing_subscriber::registry().with(fmt);
    let _ = match guard {
        Some(guard) => registry.with(guard.layer()).try_init(),
        None => registry.try_init(),
    };
}

/// Displays a path for messages.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}
