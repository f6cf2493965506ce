//! The flags several subcommands share: the adapters and config file a run uses, where its
//! spans go, and which stored session a command reads.

use std::path::PathBuf;

use compaction_core::SessionKey;

use crate::database::{Database, DbArg};
use crate::error::CliError;
use crate::registry::Registry;
use crate::wiring::{self, ConfigSource, Wiring};

/// The flags of a command that runs the engine once per turn (`replay`, `evaluate`).
#[derive(Debug, clap::Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    pub(super) adapters: AdapterArgs,
    /// Print JSON records instead of text.
    #[arg(long)]
    pub(super) json: bool,
    #[command(flatten)]
    pub(super) otlp: OtlpArgs,
}

/// Where spans go. `--otlp` takes no value (so `replay --otlp FILE` reads FILE); the URL has
/// its own flag.
#[derive(Debug, Default, clap::Args)]
pub(super) struct OtlpArgs {
    /// Export spans over OTLP/HTTP: to OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT when set, else to
    /// Phoenix's http://localhost:6006/v1/traces.
    #[arg(long, num_args = 0..=1, require_equals = true, value_name = "NONE")]
    otlp: Option<Option<String>>,
    /// Export spans over OTLP/HTTP to URL (implies --otlp).
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// The Phoenix project the spans are filed under (default: $PHOENIX_PROJECT_NAME, else
    /// Phoenix's `default` project).
    #[arg(long, value_name = "NAME")]
    otlp_project: Option<String>,
}

impl OtlpArgs {
    /// What the flags ask for; `Err` is the usage error for the old `--otlp=URL` form.
    pub(super) fn request(&self) -> Result<wiring::OtlpRequest, String> {
        if let Some(Some(url)) = &self.otlp {
            return Err(format!(
                "--otlp takes no value (got {url:?}): write --otlp-endpoint {url}"
            ));
        }
        Ok(wiring::OtlpRequest {
            export: self.otlp.is_some() || self.otlp_endpoint.is_some(),
            endpoint: self.otlp_endpoint.clone(),
            project: self.otlp_project.clone(),
        })
    }
}

/// The adapters a command builds and the config file it reads (`replay`, `evaluate`, `serve`).
#[derive(Debug, clap::Args)]
pub(super) struct AdapterArgs {
    /// Decision adapter, a registered name: auto, decisions, openai-decisions, chat-logprobs,
    /// offline, or one the binary added (overrides the config file's decision_adapter).
    #[arg(long)]
    pub(super) decision: Option<String>,
    /// Summarizer adapter, a registered name: auto, chat, offline, or one the binary added
    /// (overrides the config file's summarizer_adapter).
    #[arg(long)]
    pub(super) summarizer: Option<String>,
    /// The config file (default: the resolved zocrates_config.json, when it exists).
    #[arg(long, value_name = "PATH")]
    pub(super) config: Option<PathBuf>,
}

impl AdapterArgs {
    /// Reads the settings and builds the adapters the flags and the config file name.
    pub(super) fn wire(&self, registry: &Registry) -> Result<Wiring, CliError> {
        wiring::wire(
            registry,
            ConfigSource::Resolve(self.config.clone()),
            self.decision.as_deref(),
            self.summarizer.as_deref(),
        )
    }
}

/// The database a reading command opens (`inspect`, `recall`): never written.
#[derive(Debug, clap::Args)]
pub(super) struct ReadDbArgs {
    /// Database: a SQLite file or a PostgreSQL URL postgres://user@host:port/dbname
    /// (read-only: nothing is written).
    #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, required_unless_present = "db_env")]
    db: Option<DbArg>,
    /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
    /// password).
    #[arg(long, value_name = "VAR", conflicts_with = "db")]
    db_env: Option<String>,
}

impl ReadDbArgs {
    /// The database the flags name.
    pub(super) fn database(self) -> Result<Database, CliError> {
        Database::required(self.db, self.db_env)
    }
}

/// Which stored session a command works on.
#[derive(Debug, clap::Args)]
pub(super) struct SessionArgs {
    /// Session id.
    #[arg(long)]
    session: String,
    /// App name.
    #[arg(long, default_value = "zocrates")]
    app: String,
    /// User id.
    #[arg(long, default_value = "user")]
    user: String,
}

impl SessionArgs {
    /// The session's key.
    pub(super) fn key(&self) -> SessionKey {
        SessionKey::new(self.app.clone(), self.user.clone(), self.session.clone())
    }
}
