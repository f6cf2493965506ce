//! The service under slow and broken peers, with short limits so that every bound shows in
//! well under a second: slow headers and idle connections are closed, the connection cap
//! holds without stopping other clients for longer than the timeouts, a stalled coordinator or
//! a reader that never reads frees the session's lane, and shutdown ends within its grace
//! period whatever a client does. Waits are bounded reads and joins, never sleeps.

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use compaction_core::testing::ScriptedDecisionModel;
use compaction_core::{AdapterError, ModelInfo, async_trait};
use reqwest::StatusCode;
use service::http::{
    Coordinator, CoordinatorRequest, Limits, OfflineCoordinator, ReplyChunk, ReplyStream,
    ServeOptions,
};
use tokio::sync::mpsc;

const SHORT: Duration = Duration::from_millis(300);

fn limits() -> Limits {
    Limits::default()
        .header_read(SHORT)
        .body_read(SHORT)
        .write(SHORT)
        .upstream(SHORT, SHORT)
        .grace(Duration::from_millis(500))
}

async fn rig(coordinator: Arc<dyn Coordinator>, limits: Limits) -> Running {
    let (summarizer, _s, _r) = gated();
    start(
        coordinator,
        Arc::new(ScriptedDecisionModel::constant(0.1)),
        summarizer,
        ServeOptions::default().limits(limits),
    )
    .await
}

fn addr(rig: &Running) -> String {
    rig.base.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection (bounded by 10 s); what it sent.
fn read_to_close(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("bound the read");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_headers_and_idle_connections_are_closed() {
    let rig = rig(Arc::new(OfflineCoordinator::default()), limits()).await;
    let addr = addr(&rig);
    let closed = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut slow = TcpStream::connect(&addr).expect("connect");
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0")
            .expect("half a head");
        let mut idle = TcpStream::connect(&addr).expect("connect");
        let (a, b) = (read_to_close(&mut slow), read_to_close(&mut idle));
        (started.elapsed(), a, b)
    })
    .await
    .expect("join");
    assert!(
        closed.0 < Duration::from_secs(5),
        "closed after {:?}",
        closed.0
    );
    assert!(!closed.1.contains("200 OK"), "{}", closed.1);
    assert!(
        closed.2.is_empty() || closed.2.contains("408"),
        "{}",
        closed.2
    );
    assert!(rig.stop().await);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_connection_cap_holds_and_idle_peers_do_not_stop_others_for_long() {
    let rig = rig(
        Arc::new(OfflineCoordinator::default()),
        limits().max_connections(4),
    )
    .await;
    let addr = addr(&rig);
    let idle: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    let started = Instant::now();
    let health = rig
        .http
        .get(format!("{}/healthz", rig.base))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("healthz answers once the idle peers time out");
    assert_eq!(health.status(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
    assert!(rig.stop().await);
}

/// A coordinator that answers the first turn and never sends a chunk for the second.
struct Stalls {
    held: Mutex<Vec<mpsc::Sender<Result<ReplyChunk, AdapterError>>>>,
}

#[async_trait]
impl Coordinator for Stalls {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "stalls")
    }
    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        if request.messages.len() <= 1 {
            return OfflineCoordinator::default().stream(request).await;
        }
        let (tx, rx) = mpsc::channel(1);
        self.held.lock().unwrap().push(tx);
        Ok(rx)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_coordinator_ends_the_turn_and_frees_the_lane() {
    let rig = rig(
        Arc::new(Stalls {
            held: Mutex::new(Vec::new()),
        }),
        limits(),
    )
    .await;
    let key = rig.create("s").await;
    let first = rig.chat(&key, "One?").await;
    assert_eq!(done(&first)["turn"], 1);
    let started = Instant::now();
    let stalled = rig.chat(&key, "Two?").await;
    let last = stalled.last().expect("an event");
    assert_eq!(last.event, "error", "{stalled:?}");
    assert!(last.data.contains("within"), "{}", last.data);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The lane is free: the next turn starts at once (it stalls again, but it is not a 409).
    let third = rig
        .http
        .post(rig.url(&key, "/chat"))
        .json(&serde_json::json!({"message": "Three?"}))
        .send()
        .await
        .expect("chat");
    assert_eq!(third.status(), StatusCode::OK);
    assert!(rig.stop().await);
}

/// A coordinator that streams far more than a socket buffers.
struct Floods;

#[async_trait]
impl Coordinator for Floods {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "floods")
    }
    async fn stream(&self, _: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(async move {
            let chunk = "x".repeat(64 * 1024);
            for _ in 0..1024 {
                if tx.send(Ok(ReplyChunk::Delta(chunk.clone()))).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_never_reads_ends_as_a_partial_reply_and_frees_the_lane() {
    let rig = rig(Arc::new(Floods), limits()).await;
    let key = rig.create("s").await;
    let addr = addr(&rig);
    let body = r#"{"message": "Tell me everything."}"#;
    let mut stuck = TcpStream::connect(&addr).expect("connect");
    write!(
        stuck,
        "POST /v1/sessions/app/user/s/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    // The stuck client never reads; the server's writes stall, and after the write timeout the
    // turn ends: its partial reply is stored and the lane is free for the next turn.
    let store = rig.store.clone();
    let stored = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let session = compaction_core::SessionStore::load(store.as_ref(), &key)
                .await
                .expect("load");
            if session.events.iter().any(|e| e.partial == Some(true)) {
                return session;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the partial reply is stored within the write timeout");
    assert_eq!(stored.events.len(), 2);
    drop(stuck);
    assert!(rig.stop().await);
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_within_its_grace_period_whatever_a_client_does() {
    let rig = rig(
        Arc::new(OfflineCoordinator::default()),
        limits()
            .header_read(Duration::from_secs(60))
            .body_read(Duration::from_secs(60)),
    )
    .await;
    let addr = addr(&rig);
    // A half-sent POST: its body never comes.
    let mut half = TcpStream::connect(&addr).expect("connect");
    write!(
        half,
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"app\""
    )
    .expect("send");
    let idle: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    let started = Instant::now();
    let _ = rig.stop().await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500) + Duration::from_secs(2),
        "shutdown took {took:?}"
    );
    drop((half, idle));
}

/// Floods for a question that says "flood", never answers one that says "stall", and answers
/// the rest as the offline stand-in does.
struct Mixed {
    held: Mutex<Vec<mpsc::Sender<Result<ReplyChunk, AdapterError>>>>,
}

#[async_trait]
impl Coordinator for Mixed {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("test", "local", "mixed")
    }
    async fn stream(&self, request: &CoordinatorRequest) -> Result<ReplyStream, AdapterError> {
        let last = request
            .messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        if last.contains("flood") {
            Floods.stream(request).await
        } else if last.contains("stall") {
            let (tx, rx) = mpsc::channel(1);
            self.held.lock().unwrap().push(tx);
            Ok(rx)
        } else {
            OfflineCoordinator::default().stream(request).await
        }
    }
}

/// SIGTERM's bound holds with a reader that never reads and a coordinator that never answers
/// (long write and upstream timeouts, so only the grace period can end them): the server stops
/// within the grace period plus 2 s, and each cut turn is stored as a partial reply.
#[tokio::test(flavor = "multi_thread")]
async fn shutdown_cancels_stuck_readers_and_stalled_upstreams_within_its_grace_period() {
    let long = Duration::from_secs(120);
    let rig = rig(
        Arc::new(Mixed {
            held: Mutex::new(Vec::new()),
        }),
        limits().write(long).upstream(long, long),
    )
    .await;
    let (flood, stall) = (rig.create("flood").await, rig.create("stall").await);
    let addr = addr(&rig);
    let body = r#"{"message": "flood me"}"#;
    let mut stuck = TcpStream::connect(&addr).expect("connect");
    write!(
        stuck,
        "POST /v1/sessions/app/user/flood/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let stalled = rig
        .http
        .post(rig.url(&stall, "/chat"))
        .json(&serde_json::json!({"message": "stall please"}))
        .send()
        .await
        .expect("the stream starts");
    assert_eq!(stalled.status(), StatusCode::OK);
    let store = rig.store.clone();
    // Both questions are stored before the server is told to stop.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let mut asked = 0;
            for key in [&flood, &stall] {
                let s = compaction_core::SessionStore::load(store.as_ref(), key)
                    .await
                    .expect("load");
                asked += usize::from(!s.events.is_empty());
            }
            if asked == 2 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("both turns started");
    let started = Instant::now();
    let _ = rig.stop().await;
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(500) + Duration::from_secs(2),
        "{took:?}"
    );
    for key in [&flood, &stall] {
        let session = compaction_core::SessionStore::load(store.as_ref(), key)
            .await
            .expect("load");
        assert_eq!(
            session.events.len(),
            2,
            "{key}: the question and a partial reply"
        );
        assert_eq!(session.events[1].partial, Some(true), "{key}");
    }
    drop((stuck, stalled));
}
