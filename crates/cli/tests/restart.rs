//! PostgreSQL restarted under a running `compaction serve` (the built binary): the service
//! reconnects (the pool drops the connections the restart closed and opens new ones), and no
//! acknowledged turn (one whose `done` arrived) is lost. Turns in flight during the restart may
//! fail; the client tries them again under a new message.
//!
//! The cluster is the test's own (it is restarted, so it cannot be the shared test database):
//! skipped when PostgreSQL is not installed, failing under `CI=true`.

mod common;
mod pg;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use compaction_core::{SessionKey, SessionStore, assemble_context};
use pg::cluster::Cluster;
use pg::serve::{read_sse, session_url, start_replica};
use serde_json::json;
use session_store::PostgresStore;
use test_data::pg::installed;
use tokio::sync::{mpsc, watch};

const SESSIONS: usize = 4;
/// Acknowledged turns each session needs before the restart, and after it.
const TURNS_EACH_SIDE: usize = 3;
/// Consecutive failed attempts after the restart ended (the server accepts connections
/// again) after which the service is taken not to have reconnected.
const GIVE_UP_AFTER: usize = 20;

/// What one attempted turn came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// `done` arrived: the turn is acknowledged.
    Acknowledged,
    /// Refused, or ended with `error` or without `done`.
    Failed,
}

async fn turn(http: &reqwest::Client, base: &str, key: &SessionKey, message: &str) -> Turn {
    let Ok(response) = http
        .post(session_url(base, key, "/chat"))
        .json(&json!({ "message": message }))
        .send()
        .await
    else {
        return Turn::Failed;
    };
    if response.status() != 200 {
        return Turn::Failed;
    }
    let mut outcome = Turn::Failed;
    read_sse(response, |e| {
        match e.event.as_str() {
            "done" => outcome = Turn::Acknowledged,
            "error" => outcome = Turn::Failed,
            _ => {}
        }
        true
    })
    .await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_loses_no_acknowledged_turn() {
    if !installed("a_postgres_restart_loses_no_acknowledged_turn") {
        return;
    }
    let cluster = tokio::task::spawn_blocking(Cluster::start)
        .await
        .expect("start the cluster");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("zocrates_config.json");
    std::fs::write(&config, "{}").expect("write config");
    let replica = start_replica(dir.path(), &config, &cluster.url);
    let base = replica.base.clone();
    let http = reqwest::Client::new();
    let keys: Vec<SessionKey> = (0..SESSIONS)
        .map(|s| SessionKey::new("app", "user", format!("r{s}")))
        .collect();
    for key in &keys {
        let r = http
            .post(format!("{base}/v1/sessions"))
            .json(&json!({"app": key.app_name, "user": key.user_id, "id": key.session_id}))
            .send()
            .await
            .expect("create");
        assert_eq!(r.status(), 201);
    }

    // Every session sends turns back to back; the main task restarts PostgreSQL once each has
    // TURNS_EACH_SIDE acknowledged turns, while they keep sending.
    let acknowledged: Arc<Mutex<HashMap<SessionKey, Vec<String>>>> = Arc::default();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<()>();
    let (restarted_tx, restarted_rx) = watch::channel(false);
    let mut drivers = Vec::new();
    for key in keys.clone() {
        let (http, base, acknowledged, ready) = (
            http.clone(),
            base.clone(),
            acknowledged.clone(),
            ready_tx.clone(),
        );
        let mut restarted = restarted_rx.clone();
        drivers.push(tokio::spawn(async move {
            let (mut before, mut after, mut failing) = (0, 0, 0);
            let mut failed = [0usize; 2];
            for n in 0.. {
                let restart_done = *restarted.borrow_and_update();
                if restart_done && after >= TURNS_EACH_SIDE {
                    break;
                }
                if !restart_done && before >= TURNS_EACH_SIDE {
                    // Keep turning while the restart runs; the first turns after it count.
                    if before == TURNS_EACH_SIDE {
                        let _ = ready.send(());
                    }
                }
                let message = format!("{}: question {n}", key.session_id);
                match turn(&http, &base, &key, &message).await {
                    Turn::Acknowledged => {
                        failing = 0;
                        acknowledged
                            .lock()
                            .unwrap()
                            .entry(key.clone())
                            .or_default()
                            .push(message);
                        if restart_done {
                            after += 1;
                        } else {
                            before += 1;
                        }
                    }
                    Turn::Failed => {
                        failed[usize::from(restart_done)] += 1;
                        // While the server is down every attempt fails; only the attempts
                        // after it is back count against the service.
                        failing += usize::from(restart_done);
                        assert!(
                            failing < GIVE_UP_AFTER,
                            "{key}: {failing} turns in a row failed: the service did not reconnect"
                        );
                    }
                }
            }
            failed
        }));
    }
    drop(ready_tx);
    for _ in 0..SESSIONS {
        ready_rx.recv().await.expect("a session ready");
    }
    let admin = pg::admin(&cluster.url).await;
    let started: std::time::SystemTime = admin
        .query_one("SELECT pg_postmaster_start_time()", &[])
        .await
        .expect("start time")
        .get(0);
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart();
        cluster
    })
    .await
    .expect("restart");
    restarted_tx.send_replace(true);
    let mut failed = [0usize; 2];
    for d in drivers {
        let [during, after] = d.await.expect("driver");
        failed[0] += during;
        failed[1] += after;
    }
    drop(replica);

    // At worst each pooled connection the restart closed fails one call before the pool drops
    // it (the store's pool holds at most 16).
    assert!(
        failed[1] <= 16,
        "{} turns failed after the server was back",
        failed[1]
    );
    let admin = pg::admin(&cluster.url).await;
    let restarted: std::time::SystemTime = admin
        .query_one("SELECT pg_postmaster_start_time()", &[])
        .await
        .expect("start time")
        .get(0);
    assert!(restarted > started, "the server was not restarted");
    let store = PostgresStore::connect(&cluster.url).await.expect("connect");
    let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());
    let mut total = 0;
    for key in &keys {
        let session = store.load(key).await.expect("load");
        let events = &session.events;
        assert_eq!(session.revision.0, events.len() as u64, "{key}");
        let asked = acknowledged.get(key).expect("acknowledged turns");
        assert!(asked.len() >= 2 * TURNS_EACH_SIDE, "{key}: {asked:?}");
        for question in asked {
            let at: Vec<usize> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| e.author == "user" && e.text() == *question)
                .map(|(i, _)| i)
                .collect();
            assert_eq!(
                at.len(),
                1,
                "{key}: acknowledged {question:?} stored {} times",
                at.len()
            );
            let reply = events[at[0] + 1..]
                .iter()
                .find(|e| e.is_unscoped() && e.compaction().is_none());
            assert!(
                reply.is_some_and(|e| e.author == "coordinator"),
                "{key}: acknowledged {question:?} has no reply stored"
            );
            total += 1;
        }
        assert_eq!(
            store.load_context(key).await.unwrap(),
            assemble_context(events),
            "{key}"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "restart: {total} acknowledged turns all stored; {} attempts failed before the \
         restart ended, {} after",
        failed[0],
        failed[1]
    );
}
