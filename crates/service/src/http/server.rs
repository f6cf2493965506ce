//! The reference service: axum routes over the lanes, the store port and the coordinator.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use compaction_core::{Clock, IdGenerator, SessionStore};
use tokio::sync::watch;

use super::api::ApiError;
use super::coordinator::{Coordinator, SelectedCoordinator};
use super::sessions::{
    append_event, compaction_events, create_session, get_session, healthz, outcomes, readyz,
};
use crate::lane::{LaneReport, Lanes};

/// The largest chat message accepted by default: 1 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The server's options.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The largest `message` of a chat request, in bytes (default 1 MiB); larger: 413.
    pub max_message_bytes: usize,
    /// The author of the coordinator's events (default `coordinator`).
    pub coordinator_author: String,
    /// How many evaluation reports `GET .../outcomes` keeps, over all sessions (default 4096).
    pub reports_kept: usize,
    /// How long shutdown waits for running turns and evaluations (default 30 s).
    pub shutdown_bound: Duration,
    /// What the request guard allows beyond loopback same-origin use (see [`GuardOptions`](super::GuardOptions)).
    pub guard: super::guard::GuardOptions,
    /// Timeouts and limits of connections, bodies, writes, the coordinator and shutdown.
    pub limits: super::listener::Limits,
    /// The turn span shows `__REDACTED__` instead of the user's message (OpenInference's
    /// `OPENINFERENCE_HIDE_INPUTS`; the host reads it).
    pub hide_inputs: bool,
    /// The turn span shows `__REDACTED__` instead of the reply (`OPENINFERENCE_HIDE_OUTPUTS`).
    pub hide_outputs: bool,
    /// How far ahead of the server's clock an external event's timestamp may be (default 60 s);
    /// further: 400 naming `timestamp`, since a later event of the session could never follow it.
    pub max_clock_skew: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            coordinator_author: "coordinator".to_owned(),
            reports_kept: 4096,
            shutdown_bound: Duration::from_secs(30),
            guard: super::guard::GuardOptions::default(),
            max_clock_skew: Duration::from_secs(60),
            limits: super::listener::Limits::default(),
            hide_inputs: false,
            hide_outputs: false,
        }
    }
}

impl ServeOptions {
    /// Sets [`ServeOptions::max_message_bytes`].
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Sets [`ServeOptions::limits`].
    pub fn limits(mut self, limits: super::listener::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`ServeOptions::hide_inputs`] and [`ServeOptions::hide_outputs`].
    pub fn hide(mut self, inputs: bool, outputs: bool) -> Self {
        self.hide_inputs = inputs;
        self.hide_outputs = outputs;
        self
    }

    /// Sets [`ServeOptions::guard`].
    pub fn guard(mut self, guard: super::guard::GuardOptions) -> Self {
        self.guard = guard;
        self
    }

    /// Sets [`ServeOptions::shutdown_bound`].
    pub fn shutdown_bound(mut self, bound: Duration) -> Self {
        self.shutdown_bound = bound;
        self
    }
}

/// The reference service: build it, take its [`Server::router`] or [`Server::serve`] it.
#[derive(Clone)]
pub struct Server {
    pub(super) state: Arc<AppState>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("coordinator", &self.state.coordinator_reason)
            .field("options", &self.state.options)
            .finish_non_exhaustive()
    }
}

pub(super) struct AppState {
    pub(super) store: Arc<dyn SessionStore>,
    pub(super) lanes: Lanes,
    pub(super) coordinator: Arc<dyn Coordinator>,
    pub(super) coordinator_reason: String,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) ids: Arc<dyn IdGenerator>,
    pub(super) options: ServeOptions,
    pub(super) reports: Mutex<VecDeque<Arc<LaneReport>>>,
    pub(super) stopping: watch::Sender<bool>,
    /// Raised when the shutdown's grace period has passed: running chat streams store what they
    /// streamed as partial and end.
    pub(super) cancel: watch::Sender<bool>,
    pub(super) page: Arc<super::page::Page>,
}

impl Server {
    /// A server over `store`, evaluating in `lanes`, answering with `coordinator`.
    pub fn new(
        store: Arc<dyn SessionStore>,
        lanes: Lanes,
        coordinator: SelectedCoordinator,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdGenerator>,
        options: ServeOptions,
    ) -> Self {
        let stopping = watch::channel(false).0;
        let page = super::page::Page::new(store.clone(), lanes.clone(), stopping.subscribe());
        Server {
            state: Arc::new(AppState {
                store,
                lanes,
                coordinator: coordinator.coordinator,
                coordinator_reason: coordinator.reason,
                clock,
                ids,
                options,
                reports: Mutex::new(VecDeque::new()),
                stopping,
                cancel: watch::channel(false).0,
                page,
            }),
        }
    }

    /// Which coordinator answers, and why (the banner's words).
    pub fn coordinator(&self) -> &str {
        &self.state.coordinator_reason
    }

    /// The lanes.
    pub fn lanes(&self) -> &Lanes {
        &self.state.lanes
    }

    /// Serves the preferences over the settings file of `store` (the page's panel and
    /// `/v1/settings`): loads it, runs the lanes on its settings, and from then on applies
    /// every change (saved by the page or written by another process) from the next
    /// evaluation on. Without it the page has no preferences panel.
    pub fn watch_settings(
        &self,
        store: config_ssot::ConfigStore,
    ) -> Result<(), config_ssot::ConfigError> {
        self.state.page.watch_settings(store)
    }

    /// The routes (see the README for each), behind the request guard ([`GuardOptions`](super::GuardOptions)),
    /// which allows loopback hosts and the configured ones.
    pub fn router(&self) -> Router {
        self.guarded_router(None)
    }

    /// The routes behind the guard, which also allows `bound`'s address as a host.
    fn guarded_router(&self, bound: Option<std::net::SocketAddr>) -> Router {
        let guard = Arc::new(super::guard::Guard::new(
            self.state.options.guard.clone(),
            bound,
        ));
        // The guard runs first (outermost); the error shape applies to what the routes answer.
        self.routes()
            .layer(axum::middleware::from_fn(super::shape::json_errors))
            .layer(axum::middleware::from_fn_with_state(
                guard,
                super::guard::guard,
            ))
    }

    fn routes(&self) -> Router {
        Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/v1/sessions", post(create_session))
            .route("/v1/sessions/{app}/{user}/{id}", get(get_session))
            .route(
                "/v1/sessions/{app}/{user}/{id}/chat",
                post(super::chat::chat),
            )
            .route(
                "/v1/sessions/{app}/{user}/{id}/events",
                get(compaction_events).post(append_event),
            )
            .route("/v1/sessions/{app}/{user}/{id}/outcomes", get(outcomes))
            .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
            .with_state(self.state.clone())
            .merge(super::recall::router(self.state.store.clone()))
            .merge(super::history::router(
                self.state.store.clone(),
                self.state.page.clone(),
            ))
            .merge(self.state.page.router())
            .method_not_allowed_fallback(|| async {
                ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "this route does not take that method (see the README's route table)",
                )
            })
    }

    /// Serves on `listener` (see [`Limits`](super::Limits): the connection cap, hyper's header and
    /// idle timeouts, `TCP_NODELAY`) until `shutdown` completes; then stops taking turns, ends
    /// the event streams, lets running turns and evaluations finish within
    /// [`super::listener::Limits::grace`] (evaluations also within
    /// [`ServeOptions::shutdown_bound`]), and cancels what remains: chat streams store what they
    /// streamed as partial, and no compaction is half-written (its append is one transaction).
    /// True when everything ended by itself in time.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<bool> {
        let state = self.state.clone();
        tokio::spawn(async move {
            shutdown.await;
            state.stopping.send_replace(true);
        });
        let router = self.guarded_router(listener.local_addr().ok());
        let limits = self.state.options.limits.clone();
        let mut stopping = self.state.stopping.subscribe();
        let connections = super::listener::serve(
            listener,
            router,
            &limits,
            self.state.stopping.subscribe(),
            &self.state.cancel,
        );
        let stop_started = async {
            let _ = stopping.wait_for(|s| *s).await.map(|_| ());
            tokio::time::Instant::now()
        };
        let (drained, started) = tokio::join!(connections, stop_started);
        let left = limits.grace.saturating_sub(started.elapsed());
        let bound = left.min(self.state.options.shutdown_bound);
        Ok(self.state.lanes.shutdown(bound).await && drained)
    }
}

/// Ctrl-C or SIGTERM, whichever comes first.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
