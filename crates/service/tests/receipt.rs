//! Issue 30: the session route of `compaction serve` returns each compaction's receipt
//! (`compaction_history[].receipt {kept, corrected, dropped}`), as the engine stored it in the
//! compaction's metadata — on 127.0.0.1 with the async SQLite store and the offline summarizer.

mod common;

use std::sync::Arc;

use common::*;
use compaction_core::testing::ScriptedDecisionModel;
use compaction_core::{Receipt, SessionStore};
use serde_json::Value;
use service::http::{OfflineCoordinator, ServeOptions};
use summarizer::OfflineSummarizer;
use tokio::sync::mpsc;

#[tokio::test]
async fn the_session_route_returns_each_compaction_receipt() {
    let rig = start(
        Arc::new(OfflineCoordinator::default()),
        Arc::new(ScriptedDecisionModel::constant(0.9)),
        Arc::new(OfflineSummarizer::new(2_000)),
        ServeOptions::default(),
    )
    .await;
    let key = rig.create("receipts").await;
    let stream = rig
        .http
        .get(rig.url(&key, "/events"))
        .send()
        .await
        .expect("events");
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_sse(stream, move |e| {
        let _ = seen_tx.send(e.clone());
    }));
    let questions = [
        "What limits fast charging of graphite anodes?",
        "How much does silicon swell on lithiation?",
        "What coulombic efficiency do silicon blends reach?",
        "And the cost of vanadium flow batteries?",
    ];
    for q in questions {
        let _ = rig.chat(&key, q).await;
        // Each turn's evaluation is published once it is done.
        let report = seen_rx.recv().await.expect("a compaction event");
        assert_eq!(report.event, "compaction");
    }
    let history = rig.store.compaction_history(&key).await.expect("history");
    assert!(!history.is_empty(), "the engine compacted");
    let session: Value = rig
        .http
        .get(rig.url(&key, ""))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let served = session["compaction_history"].as_array().expect("history");
    assert_eq!(served.len(), history.len());
    for (entry, stored) in served.iter().zip(&history) {
        let receipt: Receipt = serde_json::from_value(entry["receipt"].clone())
            .expect("a receipt on every compaction");
        assert_eq!(Some(&receipt), stored.receipt.as_ref(), "{entry}");
    }
    reader.abort();
    assert!(rig.stop().await);
}
