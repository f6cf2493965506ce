//! Shared pieces of the integration tests: the spec's probe, a secret key, log capture and
//! the rendering of a received request for snapshots.
#![allow(dead_code)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use compaction_core::{DecisionState, ProbeRequest};
use decision_client::DecisionError;
use decision_client::http::HttpError;
use wiremock::Request;

/// A key that must never show up anywhere.
pub(crate) const SECRET: &str = "sk-or-v1-TOPSECRET-0123456789abcdef";

/// The probe of the spec's section 5 example.
pub(crate) fn spec_probe() -> ProbeRequest {
    ProbeRequest::new(
        "inception/mercury-decide",
        DecisionState {
            earlier_discussion: "**User**: What causes capacity fade in lithium-ion battery anodes during fast charging?\n**Assistant**: Fast charging accelerates lithium plating on graphite anodes, thickening the solid electrolyte interphase (SEI) layer and consuming active lithium.\n\n**User**: Do silicon-graphite composite anodes suffer from the same plating issues?\n**Assistant**: Silicon composites suffer less from plating due to slightly higher working potentials, but face massive particle pulverization from 300% volume expansion.".to_owned(),
            latest_turn: "**User**: What are the current levelized cost of storage (LCOS) estimates for vanadium redox flow batteries in grid peaking applications?\n**Assistant**: Stack materials and vanadium electrolyte prices dominate capex, resulting in an estimated LCOS between $0.20 and $0.35/kWh.".to_owned(),
            turns: Vec::new(),
            older: Vec::new(),
        },
    )
}

/// Asserts that `e` is the adapter's `timeout` firing, and that it fired about on time: no
/// sooner than `timeout` after `started`, and well before the server's 5 s delay.
pub(crate) fn assert_timed_out(e: &DecisionError, timeout: Duration, started: Instant) {
    let elapsed = started.elapsed();
    assert!(
        matches!(e.http(), Some(HttpError::Timeout { timeout: t, .. }) if *t == timeout),
        "{e}"
    );
    assert!(
        elapsed >= timeout && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
}

/// Everything written to the log while a test runs.
#[derive(Clone, Default)]
pub(crate) struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Installs a TRACE-level subscriber for the current thread; keep the guard alive.
    pub(crate) fn install(&self) -> tracing::subscriber::DefaultGuard {
        let sink = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// The captured text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().map(|b| b.clone()).unwrap_or_default()).into_owned()
    }
}

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A received request as JSON for a snapshot: method, path, every header but the volatile
/// `host` (its port changes), the bearer key redacted, and the body.
pub(crate) fn render_request(request: &Request) -> serde_json::Value {
    let mut headers = std::collections::BTreeMap::new();
    for (name, value) in request.headers.iter() {
        let name = name.as_str().to_owned();
        if name == "host" {
            continue;
        }
        let value = value
            .to_str()
            .unwrap_or("<non-ascii>")
            .replace(SECRET, "[REDACTED]");
        headers.insert(name, value);
    }
    serde_json::json!({
        "method": request.method.as_str(),
        "path": request.url.path(),
        "headers": headers,
        "body": serde_json::from_slice::<serde_json::Value>(&request.body).unwrap_or_default(),
    })
}
