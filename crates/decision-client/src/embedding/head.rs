//! The embedding model's decision head: z = bias + Σ wᵢ·xᵢ over [`super::features`], then
//! p = σ(A·z + B + C·research) (Platt scaling with its own intercept shift C in a research
//! context: research sessions and chit-chat have different base rates of pivots). Fitted by logistic regression (L2) on the TIAGE **train** split plus the
//! labelled research sessions, Platt's A and B on the TIAGE **dev** split plus the same
//! sessions; the TIAGE test split is never read by the fit. Reproducible with
//! `cargo run --release -p adaptive-compaction-decision-client --features embedding --example
//! fit_embedding_model -- --write` (docs/DECISION-QUALITY.md has the leave-one-session-out
//! figures: each session scored by a head fitted without it).

use super::features::N_FEATURES;
use crate::offline::sigmoid;

// FITTED-CONSTANTS-BEGIN
// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding
// --example fit_embedding_model -- --write`: weights on 1177 TIAGE train cases + sessions
// ["archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 40, L2 0.001), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.708.
/// Fitted weights, same order as [`super::features::FEATURE_NAMES`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    -1.3505, // sim_prev_query
    -0.8002, // sim_prev_turn
    1.1218,  // sim_unit
    2.5939,  // tail_sim_unit
    -0.7167, // tail_gap
    0.0000,  // return_gain
    -2.7240, // reply_sim_unit
    1.2808,  // prev_shift
    0.3456,  // prev_recap
    3.8651,  // prev_table
    -0.7121, // research_sim_prev_query
    -1.6486, // research_reply_sim_unit
    0.7948,  // novelty_last_pair
    0.5596,  // novelty_earlier
    2.3172,  // reply_novelty
    1.0962,  // user_asks
    -0.9867, // previous_asked
    0.0397,  // shared_figure
    0.1162,  // user_length
    -2.9929, // no_earlier
    -0.0458, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -4.5745;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.9264;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.1762;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 1.6270;
// FITTED-CONSTANTS-END

/// z with the given weights and bias.
pub fn logit(x: &[f64; N_FEATURES], weights: &[f64; N_FEATURES], bias: f64) -> f64 {
    bias + weights.iter().zip(x).map(|(w, x)| w * x).sum::<f64>()
}

/// p with the embedded constants; `research` is the state's research context.
pub fn probability(x: &[f64; N_FEATURES], research: bool) -> f64 {
    let shift = if research { PLATT_RESEARCH } else { 0.0 };
    sigmoid(PLATT_A * logit(x, &WEIGHTS, BIAS) + PLATT_B + shift)
}
