//! A downstream crate's own `compaction` binary: the shipped command line with one extra
//! decision adapter, `fixed`, chosen like a built-in one (`"decision_adapter": "fixed"` in the
//! config file, or `--decision fixed`) and configured by its own key,
//! `decision_fixed_probability` (a misspelling of it is an error, as for every adapter key).
//!
//! ```text
//! echo '{"decision_fixed_probability": 0.95}' > cfg.json
//! cargo run -p adaptive-compaction-cli --example compaction_with_extra_adapter -- \
//!     replay crates/cli/demo/research-conversation.jsonl --config cfg.json --decision fixed
//! ```

#![allow(unreachable_pub)] // `registry` and the key are public for the test that includes this file.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cli::registry::{BuiltDecision, Registry};
use compaction_core::{
    AdapterError, DecisionAnswer, DecisionModel, ModelInfo, ProbeRequest, async_trait,
};

/// The extra adapter's one key.
pub const KEY_FIXED_PROBABILITY: &str = "decision_fixed_probability";

/// Answers the same probability on every probe: a stand-in for an in-house classifier.
struct Fixed(f64);

#[async_trait]
impl DecisionModel for Fixed {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("in-house", "local", "fixed")
    }

    async fn decide(&self, _request: &ProbeRequest) -> Result<DecisionAnswer, AdapterError> {
        Ok(DecisionAnswer::new(self.0).with_served_model("fixed-v1"))
    }
}

/// The built-in adapters and `fixed`.
pub fn registry() -> Registry {
    Registry::builtin().decision_adapter("fixed", &[KEY_FIXED_PROBABILITY], |input| {
        let p = input
            .config
            .get(KEY_FIXED_PROBABILITY)
            .and_then(serde_json::Value::as_f64)
            .filter(|p| (0.0..=1.0).contains(p))
            .ok_or_else(|| format!("{KEY_FIXED_PROBABILITY} must be a number from 0 to 1"))?;
        Ok(BuiltDecision {
            model: Arc::new(Fixed(p)),
            reason: format!("fixed probability {p} (configured)"),
            timeout: Duration::from_secs(1),
        })
    })
}

#[allow(dead_code)] // The test that includes this file runs `registry()`, not `main`.
fn main() -> ExitCode {
    cli::run_with(registry())
}
