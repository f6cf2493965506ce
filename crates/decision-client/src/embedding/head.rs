//! The embedding model's decision head: z = bias + Σ wᵢ·xᵢ over [`super::features`], then
//! p = σ(A·z + B). Fitted by logistic regression (L2) on the TIAGE **train** split plus the
//! labelled research sessions, Platt's A and B on the TIAGE **dev** split plus the same
//! sessions; the TIAGE test split is never read by the fit. Reproducible with
//! `cargo run --release -p adaptive-compaction-decision-client --features embedding --example
//! fit_embedding_model -- --write` (docs/DECISION-QUALITY.md has the leave-one-session-out
//! figures: each session scored by a head fitted without it).

use super::features::N_FEATURES;
use crate::offline::sigmoid;

// FITTED-CONSTANTS-BEGIN
/// Fitted weights, same order as [`super::features::FEATURE_NAMES`].
pub const WEIGHTS: [f64; N_FEATURES] = [0.0; N_FEATURES];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = 0.0;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.0;
/// Platt scaling intercept.
pub const PLATT_B: f64 = 0.0;
// FITTED-CONSTANTS-END

/// z with the given weights and bias.
pub fn logit(x: &[f64; N_FEATURES], weights: &[f64; N_FEATURES], bias: f64) -> f64 {
    bias + weights.iter().zip(x).map(|(w, x)| w * x).sum::<f64>()
}

/// p with the embedded constants.
pub fn probability(x: &[f64; N_FEATURES]) -> f64 {
    sigmoid(PLATT_A * logit(x, &WEIGHTS, BIAS) + PLATT_B)
}
