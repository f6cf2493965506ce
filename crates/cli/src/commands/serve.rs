//! `compaction serve`: the reference service of spec section 8 on the same config file,
//! adapters and store as the other commands. The routes, the lanes and the coordinator live in
//! the service crate (feature `http`); this module only wires them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use service::http::{
    CoordinatorConfig, GuardOptions, Limits, OpenTurnSweep, ServeOptions, Server, Token,
    select_coordinator, shutdown_signal,
};
use service::{LaneConfig, Lanes};

use super::args::{AdapterArgs, OtlpArgs};
use crate::database::{Database, DbArg, Store};
use crate::error::{Cause, CliError};
use crate::registry::Registry;
use crate::wiring::{self, ProcessIds, SystemClock, build_engine, init_logging};

#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Session database: a SQLite file (created when missing) or a PostgreSQL URL
    /// postgres://user@host:port/dbname shared by every replica (tables created when missing).
    #[arg(long, value_name = "PATH|URL", value_parser = crate::database::parse_db, default_value = "compaction-sessions.db")]
    db: DbArg,
    /// Read the PostgreSQL URL from the environment variable VAR (for a URL that holds a
    /// password).
    #[arg(long, value_name = "VAR", conflicts_with = "db")]
    db_env: Option<String>,
    #[command(flatten)]
    pub(super) adapters: AdapterArgs,
    #[command(flatten)]
    pub(super) otlp: OtlpArgs,
    /// The largest chat message accepted, in bytes (larger: 413).
    #[arg(long, value_name = "BYTES", default_value_t = service::http::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// The longest a turn waits for the previous turn's evaluation, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    max_wait: f64,
    #[command(flatten)]
    access: AccessArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The service's timeouts and limits (see the service's `Limits`; README, operations).
#[derive(Debug, clap::Args)]
pub(super) struct LimitArgs {
    /// A request head must arrive within this, and an idle kept-alive connection closes after
    /// it (seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    header_timeout: f64,
    /// A request body must arrive within this (seconds; 408 after it).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    body_timeout: f64,
    /// At most this many connections at once (lowered, with a note, to what the process's
    /// file limit allows after raising it to the hard limit); more wait in the kernel's backlog.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_connections: usize,
    /// A reply event must reach a client within this (seconds); a reader that stops reading
    /// ends its turn as a partial reply.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    write_timeout: f64,
    /// The coordinator's first chunk, and each next one, must come within this (seconds).
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    upstream_timeout: f64,
    /// On SIGTERM, running turns and evaluations finish within this (seconds); then what
    /// remains is cancelled (partial replies stored) and the process exits.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    grace: f64,
    /// At start, a turn left without a reply (a crash mid-stream) is closed by an `interrupted`
    /// reply when its session had no append for this long (seconds; a reply another replica
    /// streams for longer would be closed too).
    #[arg(long, value_name = "SECONDS", default_value_t = service::http::DEFAULT_QUIET_FOR.as_secs_f64())]
    open_turn_quiet: f64,
}

impl LimitArgs {
    /// The limits, with the connection cap `cap` (the flag's, within the descriptor budget).
    fn limits(&self, cap: usize) -> Result<Limits, CliError> {
        let seconds = |flag: &str, v: f64| {
            if v.is_finite() && v > 0.0 && v <= 86_400.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(CliError::Config(Cause::new(format!(
                    "--{flag} must be a number of seconds in (0, 86400], got {v}"
                ))))
            }
        };
        if self.max_connections == 0 {
            return Err(CliError::Config(Cause::new(
                "--max-connections must be at least 1".to_owned(),
            )));
        }
        seconds("open-turn-quiet", self.open_turn_quiet)?;
        let upstream = seconds("upstream-timeout", self.upstream_timeout)?;
        Ok(Limits::default()
            .header_read(seconds("header-timeout", self.header_timeout)?)
            .body_read(seconds("body-timeout", self.body_timeout)?)
            .max_connections(cap)
            .write(seconds("write-timeout", self.write_timeout)?)
            .upstream(upstream, upstream)
            .grace(seconds("grace", self.grace)?))
    }
}

/// Who may reach `compaction serve` (the request guard's options; see the service's `guard`).
#[derive(Debug, Default, clap::Args)]
pub(super) struct AccessArgs {
    /// Also serve requests whose Host header names NAME (repeatable; loopback names and the
    /// bound address are always allowed; `*` allows any host, sensible only with a token).
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Allow cross-origin calls from ORIGIN, `scheme://host[:port]` (repeatable; none by
    /// default).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// Read the access token from the environment variable VAR (a bind that is not loopback
    /// needs a token; without this flag one is generated and printed once with a login URL).
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// Require the token on a loopback bind too.
    #[arg(long)]
    require_token: bool,
}

/// Where the token came from, for the banner (which shows a generated token once, and never
/// one read from the environment).
enum TokenSource {
    None,
    Env(String),
    Generated,
}

/// The guard's options from the flags, and where its token came from.
fn access(args: &AccessArgs, addr: SocketAddr) -> Result<(GuardOptions, TokenSource), CliError> {
    let mut guard = GuardOptions::default();
    for host in &args.allowed_hosts {
        let host = host.trim();
        if host.is_empty() || host.contains(['/', ' ']) {
            return Err(CliError::Config(Cause::new(format!(
                "--allowed-host must be a host name or address without scheme or path, got {host:?}"
            ))));
        }
        guard = guard.allow_host(host);
    }
    for origin in &args.cors_origins {
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .map(|a| a.trim_end_matches('/'));
        match authority {
            Some(a) if !a.is_empty() && !a.contains('/') => guard = guard.cors_origin(origin),
            _ => {
                return Err(CliError::Config(Cause::new(format!(
                    "--cors-origin must be an origin such as http://localhost:3000 (scheme, host, optional port; no path), got {origin:?}"
                ))));
            }
        }
    }
    let (token, source) = match &args.token_env {
        Some(var) => {
            let value = std::env::var(var).unwrap_or_default();
            let token = Token::new(value).ok_or_else(|| {
                CliError::Config(Cause::new(format!(
                    "--token-env {var}: the variable must hold a token of letters, digits, `-`, `_`, `.` or `~` (it is unset, empty or holds other characters)"
                )))
            })?;
            (Some(token), TokenSource::Env(var.clone()))
        }
        None if args.require_token || !addr.ip().is_loopback() => {
            (Some(generate_token()?), TokenSource::Generated)
        }
        None => (None, TokenSource::None),
    };
    if let Some(token) = token {
        guard = guard.token(token);
    }
    Ok((guard, source))
}

/// A random token: 24 bytes of the system's randomness, in hex.
fn generate_token() -> Result<Token, CliError> {
    use std::io::Read as _;
    let mut bytes = [0u8; 24];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| {
            CliError::Other(Cause::with(
                format!(
                    "cannot generate an access token from /dev/urandom ({e}): pass --token-env VAR"
                ),
                e,
            ))
        })?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Token::new(hex)
        .ok_or_else(|| CliError::Other(Cause::new("generated token was empty".to_owned())))
}

/// The banner's access line.
fn access_line(guard: &GuardOptions, source: &TokenSource, addr: SocketAddr) -> String {
    match (source, &guard.token) {
        (TokenSource::Generated, Some(token)) => format!(
            "access: token required; log in at http://{addr}/?token={} (generated for this run; API clients send Authorization: Bearer <token>)",
            token.expose()
        ),
        (TokenSource::Env(var), Some(_)) => format!(
            "access: token required (from ${var}); log in at http://{addr}/?token=<token>, API clients send Authorization: Bearer <token>"
        ),
        _ => "access: loopback only, no token (same-origin writes with JSON bodies)".to_owned(),
    }
}

/// The coordinator's keys, read from the same config file as the adapters' (absent file:
/// the offline stand-in).
fn coordinator_config(explicit: Option<PathBuf>) -> Result<CoordinatorConfig, CliError> {
    let path = config_ssot::ConfigPath::from_env(explicit).map_err(CliError::config)?;
    if !path.file().exists() {
        return Ok(CoordinatorConfig::default());
    }
    let shown = wiring::shown(path.file());
    let file = config_ssot::ConfigStore::open(path)
        .load()
        .map_err(CliError::config)?;
    CoordinatorConfig::from_map(file.raw())
        .map_err(|e| CliError::Config(Cause::with(format!("{shown}: {e}"), e)))
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

/// Runs `compaction serve` until SIGTERM or Ctrl-C, then drains running turns within
/// `--grace`.
pub(super) async fn run(registry: &Registry, args: ServeArgs) -> Result<(), CliError> {
    // `--db-env` wins over `--db`'s default (clap refuses both given).
    let db = Database::from_args(Some(args.db.clone()), args.db_env.clone())?
        .ok_or_else(|| CliError::Other(Cause::new("no database")))?;
    check_max_wait(args.max_wait)?;
    let adapters = &args.adapters;
    let wiring = adapters.wire(registry)?;
    let coordinator = select_coordinator(&coordinator_config(adapters.config.clone())?, |name| {
        std::env::var(name).ok()
    });
    let opened = Store::open(&db).await?;
    let otlp = args
        .otlp
        .request()
        .map_err(|m| CliError::Other(Cause::new(m)))?;
    let (telemetry, guard, span_config) = wiring::telemetry(otlp)?;
    init_logging(guard.as_ref());
    let clock = Arc::new(SystemClock::default());
    let ids = Arc::new(ProcessIds::default());
    let engine = build_engine(
        &wiring,
        opened.port(),
        clock.clone(),
        ids.clone(),
        telemetry,
    )?;
    let lanes = Lanes::new(
        Arc::new(engine),
        LaneConfig::default().max_wait(Duration::from_secs_f64(args.max_wait)),
    );
    let (access, token_source) = access(&args.access, args.addr)?;
    let budget = crate::descriptors::raise();
    let (cap, lowered) = crate::descriptors::connection_cap(args.limits.max_connections, budget);
    let limits = args.limits.limits(cap)?;
    let (listener, addr) = bind(args.addr).await?;
    let server = Server::new(
        opened.port(),
        lanes,
        coordinator,
        clock,
        ids,
        ServeOptions::default()
            .max_message_bytes(args.max_message_bytes)
            .guard(access.clone())
            .limits(limits.clone())
            .hide(span_config.hide_inputs, span_config.hide_outputs)
            .shutdown_bound(limits.grace),
    );
    let open_turns = close_open_turns(&server, args.limits.open_turn_quiet).await;
    let preferences = watch_settings(&server, adapters.config.clone());
    println!(
        "coordinator: {} | {}\ndatabase: {}\npreferences: {preferences}\n{}\n{}\n{open_turns}\nlistening on http://{addr} \
         (open it in a browser for the chat and preferences page; Ctrl-C or SIGTERM to stop)",
        server.coordinator(),
        wiring.banner(),
        opened.shown(&db),
        access_line(&access, &token_source, addr),
        crate::descriptors::banner(cap, budget, lowered.as_deref()),
    );
    let drained = server
        .serve(listener, shutdown_signal())
        .await
        .map_err(|e| CliError::Other(Cause::with(format!("server failed: {e}"), e)))?;
    // The span exporter (`guard`) flushes after the last line, when this returns.
    stopped(drained)
}

/// `--max-wait`: a number of seconds, at least 0.
fn check_max_wait(seconds: f64) -> Result<(), CliError> {
    if seconds.is_finite() && seconds >= 0.0 {
        return Ok(());
    }
    Err(CliError::Config(Cause::new(format!(
        "--max-wait must be a number of seconds >= 0, got {seconds}"
    ))))
}

/// Listens on `addr`; the listener and the address it got (the port, when `addr` asked for
/// any).
async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), CliError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::Other(Cause::with(format!("cannot listen on {addr}: {e}"), e)))?;
    let bound = listener.local_addr().map_err(CliError::other)?;
    Ok((listener, bound))
}

/// Closes the turns a crash left without a reply, in sessions with no append for `quiet`
/// seconds; the banner's line about it.
async fn close_open_turns(server: &Server, quiet: f64) -> String {
    let quiet = Duration::from_secs_f64(quiet);
    match server.close_open_turns(quiet).await {
        Ok(OpenTurnSweep::Done { listed, closed }) => format!(
            "open turns: {closed} left by a crash closed as interrupted ({listed} sessions \
             listed as open with no append for {} s)",
            quiet.as_secs_f64()
        ),
        Ok(_) => "open turns: this store cannot list its sessions; a turn left open is closed \
                  before its session's next turn"
            .to_owned(),
        Err(e) => format!(
            "open turns: not swept at start ({e}); each is closed before its session's next turn"
        ),
    }
}

/// How the service stopped: every turn ended, or the grace period ran out.
fn stopped(drained: bool) -> Result<(), CliError> {
    if drained {
        eprintln!("stopped: every turn and evaluation ended");
        Ok(())
    } else {
        Err(CliError::Other(Cause::new(
            "stopped before every turn and evaluation ended (the --grace period passed): running \
             replies were stored as partial, nothing half-written was stored"
                .to_owned(),
        )))
    }
}
