//! The **receipt** of a compaction (issue 30): what the fold did to the folded turns'
//! findings, recorded beside the summary so that a researcher can see what was kept, what a
//! later correction replaced and what was left out, and why.
//!
//! The core owns its shape. A summarizer hands one back with its [`crate::Summary`]
//! ([`crate::Summary::with_receipt`]); the engine stores it in the compaction event's
//! engine-owned metadata (`custom_metadata.adaptive_compaction.receipt`, ADK-compatible:
//! ADK keeps `custom_metadata` as an opaque map), and readers ([`Receipt::of_event`]) get it
//! back from any stored compaction. A compaction written before receipts existed, or by a
//! summarizer that reports none, has no receipt (`None`), never an invented one.
//!
//! ```json
//! {"kept": 12,
//!  "corrected": [{"was": "…1.55 per 10 ng/mL…", "now": "…1.55 per 50 ng/mL…", "turn": 16}],
//!  "dropped": [{"finding": "…", "reason": "duplicate"}]}
//! ```
//!
//! A dropped finding's reason is `duplicate` (another kept line states every figure of it),
//! `budget` (the token budget left no room) or `superseded` (it only restated a claim a later
//! turn corrected; the corrections state it once).
//!
//! ```text
//! ```
//!
//! What this module must never do: read a summary's text to guess a receipt (the summarizer
//! that made the choices reports them), or fail a compaction because a receipt is missing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::Event;
use crate::event::METADATA_KEY;

/// The key of the receipt inside the engine's metadata object.
pub const RECEIPT_KEY: &str = "receipt";

/// What one compaction did to the folded turns' findings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// How many findings the summary states (carried forward and new).
    pub kept: usize,
    /// Claims a later correction replaced in this fold: each leaves the findings and is
    /// stated once among the summary's corrections.
    #[serde(default)]
    pub corrected: Vec<CorrectedClaim>,
    /// Findings this fold left out, with the reason.
    #[serde(default)]
    pub dropped: Vec<DroppedFinding>,
}

/// A claim a later turn corrected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrectedClaim {
    /// What was said.
    pub was: String,
    /// What it was corrected to.
    pub now: String,
    /// The session's turn (1-based) that corrected it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
}

/// A finding a fold left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedFinding {
    /// The finding's text.
    pub finding: String,
    /// Why it went.
    pub reason: DropReason,
}

/// Why a finding was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Every figure it states is stated by another kept line.
    Duplicate,
    /// The summary's token budget left no room for it.
    Budget,
    /// It only restated a claim a later turn corrected (the correction states it once).
    Superseded,
}

impl DropReason {
    /// The reason as the receipt writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Duplicate => "duplicate",
            DropReason::Budget => "budget",
            DropReason::Superseded => "superseded",
        }
    }
}

impl Receipt {
    /// The receipt as the JSON value stored in the metadata.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The receipt stored on a compaction event, if it carries one (`None` for an event
    /// written without one, or one whose receipt does not have this shape).
    pub fn of_event(event: &Event) -> Option<Receipt> {
        let value = event
            .extra
            .get("custom_metadata")?
            .get(METADATA_KEY)?
            .get(RECEIPT_KEY)?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Dropped findings for one reason.
    pub fn dropped_for(&self, reason: DropReason) -> usize {
        self.dropped.iter().filter(|d| d.reason == reason).count()
    }

    /// One line for a person: `12 findings kept, 1 corrected, 0 dropped`.
    pub fn headline(&self) -> String {
        format!(
            "{} finding{} kept, {} corrected, {} dropped",
            self.kept,
            if self.kept == 1 { "" } else { "s" },
            self.corrected.len(),
            self.dropped.len()
        )
    }

    /// The receipt as text lines: the headline, each correction (`was → now`, with its
    /// turn), and the dropped findings counted by reason (each one is in the JSON).
    pub fn render_text(&self) -> Vec<String> {
        let mut out = vec![self.headline()];
        for c in &self.corrected {
            let turn = c.turn.map(|t| format!(" in turn {t}")).unwrap_or_default();
            out.push(format!("corrected{turn}: {} → {}", c.was, c.now));
        }
        let reasons: Vec<String> = [
            DropReason::Duplicate,
            DropReason::Budget,
            DropReason::Superseded,
        ]
        .into_iter()
        .filter_map(|r| {
            let n = self.dropped_for(r);
            (n > 0).then(|| format!("{n} {}", r.as_str()))
        })
        .collect();
        if !reasons.is_empty() {
            out.push(format!("dropped: {}", reasons.join(", ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_receipt_round_trips_through_the_engine_metadata() {
        let receipt = Receipt {
            kept: 3,
            corrected: vec![CorrectedClaim {
                was: "Hollow ridge yields 12 kg/ha".into(),
                now: "Hollow ridge yields 21 kg/ha, not 12 kg/ha".into(),
                turn: Some(5),
            }],
            dropped: vec![DroppedFinding {
                finding: "Plot 4 held 3.5 kg".into(),
                reason: DropReason::Budget,
            }],
        };
        let mut event = Event::new("c1", "i1", "user", crate::Timestamp::new(1.0).unwrap());
        event.extra.insert(
            "custom_metadata".into(),
            json!({ METADATA_KEY: { "forced": false, RECEIPT_KEY: receipt.to_value() } }),
        );
        assert_eq!(Receipt::of_event(&event), Some(receipt.clone()));
        assert_eq!(
            receipt.headline(),
            "3 findings kept, 1 corrected, 1 dropped"
        );
        assert_eq!(
            receipt.to_value()["dropped"][0]["reason"],
            json!("budget"),
            "{}",
            receipt.to_value()
        );
        let bare = Event::new("c2", "i2", "user", crate::Timestamp::new(2.0).unwrap());
        assert_eq!(Receipt::of_event(&bare), None);
    }
}
