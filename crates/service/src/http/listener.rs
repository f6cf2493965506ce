//! The accept loop of [`super::Server::serve`]: hyper with a timer, so that no peer can hold
//! the service, and a shutdown that ends whatever the peers do.
//!
//! - **Connection cap with back-pressure**: at most [`Limits::max_connections`] connections are
//!   served; at the cap the loop stops accepting (the kernel's backlog holds the rest) until one
//!   closes. An accept error (EMFILE, ENFILE, ECONNABORTED) pauses the loop briefly and never
//!   spins.
//! - **Header read and idle keep-alive timeout** ([`Limits::header_read`]): hyper's timer closes a
//!   connection that sends a request head too slowly, or sits idle between requests.
//! - `TCP_NODELAY` on every accepted socket: a delta goes out at once on a kept-alive connection.
//! - **Bounded shutdown**: when `stopping` turns true the loop stops accepting, asks every
//!   connection to finish its request and close, and waits at most [`Limits::grace`]; then it
//!   raises `cancel` (the chat streams store what they streamed as partial and end) and waits at
//!   most [`CANCEL_WAIT`] more before it gives the remaining connections up.
//!
//! The request body, the reply's writes and the coordinator's stream have their own timeouts in
//! the handlers ([`Limits`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// How long the loop waits for the cancelled streams to end after the grace period.
pub(super) const CANCEL_WAIT: Duration = Duration::from_secs(1);
/// How long the loop pauses after an accept error (EMFILE and the like).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The service's timeouts and limits: each a setting of `compaction serve` (README, operations).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Limits {
    /// A request head must arrive within this, and an idle kept-alive connection closes after
    /// it (default 10 s).
    pub header_read: Duration,
    /// A request body must arrive within this (default 30 s; 408 otherwise).
    pub body_read: Duration,
    /// At most this many connections are served at once (default 512; `compaction serve` sets
    /// 4,096 within the process's descriptor budget); more wait in the
    /// kernel's backlog.
    pub max_connections: usize,
    /// A reply event must be handed to a client within this (default 30 s); a reader that
    /// stops reading ends its turn as a partial reply and frees the lane.
    pub write: Duration,
    /// The coordinator's first chunk must come within this (default 60 s).
    pub upstream_first_byte: Duration,
    /// The coordinator's next chunk must come within this (default 60 s).
    pub upstream_between_chunks: Duration,
    /// SIGTERM lets running turns and evaluations finish within this, then cancels what
    /// remains (default 30 s).
    pub grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            max_connections: 512,
            write: Duration::from_secs(30),
            upstream_first_byte: Duration::from_secs(60),
            upstream_between_chunks: Duration::from_secs(60),
            grace: Duration::from_secs(30),
        }
    }
}

impl Limits {
    /// Sets [`Limits::header_read`].
    pub fn header_read(mut self, d: Duration) -> Self {
        self.header_read = d;
        self
    }
    /// Sets [`Limits::body_read`].
    pub fn body_read(mut self, d: Duration) -> Self {
        self.body_read = d;
        self
    }
    /// Sets [`Limits::max_connections`] (at least 1).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }
    /// Sets [`Limits::write`].
    pub fn write(mut self, d: Duration) -> Self {
        self.write = d;
        self
    }
    /// Sets both coordinator timeouts ([`Limits::upstream_first_byte`] and
    /// [`Limits::upstream_between_chunks`]).
    pub fn upstream(mut self, first_byte: Duration, between_chunks: Duration) -> Self {
        self.upstream_first_byte = first_byte;
        self.upstream_between_chunks = between_chunks;
        self
    }
    /// Sets [`Limits::grace`].
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }
}

/// Serves `router` on `listener` until `stopping` turns true, then shuts down within the grace
/// period (raising `cancel` when it passes). True when every connection ended by itself.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: &Limits,
    mut stopping: watch::Receiver<bool>,
    cancel: &watch::Sender<bool>,
) -> bool {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    // HTTP/1 only, and no upgrades: the protocol sniffing of an HTTP/1-or-2 (or upgradeable)
    // connection waits for a first byte with no timer, so an idle connection would never reach
    // hyper's header timeout.
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    loop {
        let permit = tokio::select! {
            biased;
            () = async { let _ = stopping.wait_for(|s| *s).await; } => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            biased;
            () = async { let _ = stopping.wait_for(|s| *s).await; } => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, _) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!("accept failed ({e}); pausing before the next accept");
                drop(permit);
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("could not set TCP_NODELAY on an accepted connection: {e}");
        }
        let service = TowerToHyperService::new(router.clone());
        let connection = builder
            .serve_connection(TokioIo::new(tcp), service)
            .into_owned();
        let watched = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = watched.await {
                tracing::debug!("connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(limits.grace, graceful.shutdown());
    if drained.await.is_ok() {
        return true;
    }
    tracing::warn!(
        "shutdown: connections still open after the {:?} grace period; cancelling their turns",
        limits.grace
    );
    cancel.send_replace(true);
    // The cancelled streams store their partial replies; whatever is still open after that is
    // given up (the process is ending).
    let _ = tokio::time::timeout(
        CANCEL_WAIT,
        permits.acquire_many(limits.max_connections as u32),
    )
    .await;
    false
}
