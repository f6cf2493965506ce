//! `compaction serve`: the reference service of spec section 8 on the same config file,
//! adapters and store as the other commands. The routes, the lanes and the coordinator live in
//! the service crate (feature `http`); this module only wires them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use service::http::{CoordinatorConfig, ServeOptions, Server, select_coordinator, shutdown_signal};
use service::{LaneConfig, Lanes};

use crate::error::CliError;
use crate::wiring::{self, ConfigSource, ProcessIds, SystemClock, wire};

/// What `compaction serve` was asked.
pub(crate) struct ServeArgs {
    pub(crate) registry: crate::Registry,
    pub(crate) addr: SocketAddr,
    pub(crate) db: crate::database::Database,
    pub(crate) config: Option<PathBuf>,
    pub(crate) decision: Option<String>,
    pub(crate) summarizer: Option<String>,
    pub(crate) otlp: crate::wiring::OtlpRequest,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_wait_secs: f64,
}

/// The coordinator's keys, read from the same config file as the adapters' (absent file:
/// the offline stand-in).
fn coordinator_config(explicit: Option<PathBuf>) -> Result<CoordinatorConfig, CliError> {
    let path =
        config_ssot::ConfigPath::from_env(explicit).map_err(|e| CliError::Config(e.to_string()))?;
    if !path.file().exists() {
        return Ok(CoordinatorConfig::default());
    }
    let shown = wiring::shown(path.file());
    let file = config_ssot::ConfigStore::open(path)
        .load()
        .map_err(|e| CliError::Config(e.to_string()))?;
    CoordinatorConfig::from_map(file.raw()).map_err(|e| CliError::Config(format!("{shown}: {e}")))
}

/// The page's preferences follow the config file (config-ssot creates it with the defaults
/// when it is missing, as at any start); a file that cannot be used leaves the service running
/// without them, and the banner says why.
fn watch_settings(server: &Server, explicit: Option<PathBuf>) -> String {
    let path = match config_ssot::ConfigPath::from_env(explicit) {
        Ok(path) => path,
        Err(e) => return format!("off ({e})"),
    };
    let shown = wiring::shown(path.file());
    let existed = path.file().exists();
    match server.watch_settings(config_ssot::ConfigStore::open(path)) {
        Ok(()) if existed => format!("{shown} (watched: changes apply from the next turn)"),
        Ok(()) => format!(
            "{shown} (created with the spec defaults; watched: changes apply from the next turn)"
        ),
        Err(e) => format!("off ({e})"),
    }
}

pub(crate) async fn serve(args: ServeArgs) -> Result<(), CliError> {
    if !(args.max_wait_secs.is_finite() && args.max_wait_secs >= 0.0) {
        return Err(CliError::Config(format!(
            "--max-wait must be a number of seconds >= 0, got {}",
            args.max_wait_secs
        )));
    }
    let wiring = wire(
        &args.registry,
        ConfigSource::Resolve(args.config.clone()),
        args.decision.as_deref(),
        args.summarizer.as_deref(),
    )?;
    let coordinator = select_coordinator(&coordinator_config(args.config.clone())?, |name| {
        std::env::var(name).ok()
    });
    let opened = crate::database::Store::open(&args.db).await?;
    let store = opened.port();
    let (telemetry, guard, _) = wiring::telemetry(args.otlp)?;
    crate::init_logging(guard.as_ref());
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = crate::build_engine(
        &wiring,
        store.clone(),
        clock.clone(),
        ids.clone(),
        telemetry,
    )?;
    let lanes = Lanes::new(
        Arc::new(engine),
        LaneConfig::default().max_wait(Duration::from_secs_f64(args.max_wait_secs)),
    );
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| CliError::Other(format!("cannot listen on {}: {e}", args.addr)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Other(e.to_string()))?;
    let server = Server::new(
        store,
        lanes,
        coordinator,
        clock,
        ids,
        ServeOptions::default().max_message_bytes(args.max_message_bytes),
    );
    let preferences = watch_settings(&server, args.config.clone());
    println!(
        "coordinator: {} | {}\ndatabase: {}\npreferences: {preferences}\nlistening on http://{addr} \
         (open it in a browser for the chat and preferences page; Ctrl-C or SIGTERM to stop)",
        server.coordinator(),
        wiring.banner(),
        opened.shown(&args.db),
    );
    let drained = server
        .serve(listener, shutdown_signal())
        .await
        .map_err(|e| CliError::Other(format!("server failed: {e}")))?;
    drop(guard);
    if drained {
        eprintln!("stopped: every turn and evaluation ended");
        Ok(())
    } else {
        Err(CliError::Other(
            "stopped before every evaluation ended (the shutdown bound passed); nothing half-written \
             was stored"
                .to_owned(),
        ))
    }
}
