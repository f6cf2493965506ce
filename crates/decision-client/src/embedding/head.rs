//! The embedding model's decision head: z = bias + Σ wᵢ·xᵢ over [`super::features`], then
//! p = σ(A·z + B + C·research) (Platt scaling with its own intercept shift C in a research
//! context: research sessions and chit-chat have different base rates of pivots). Fitted by logistic regression (L2) on the TIAGE **train** split plus the
//! labelled research sessions, Platt's A and B on the TIAGE **dev** split plus the same
//! sessions; the TIAGE test split is never read by the fit. Reproducible with
//! `cargo run --release -p adaptive-compaction-decision-client --features embedding,eval --example
//! fit_embedding_model -- --write` (docs/DECISION-QUALITY.md has the leave-one-session-out
//! figures: each session scored by a head fitted without it).

use super::features::N_FEATURES;
use crate::offline::sigmoid;

// FITTED-CONSTANTS-BEGIN
// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding,eval
// --example fit_embedding_model -- --write`: weights on 1177 TIAGE train cases + sessions
// ["clinpharm-anticoag", "epi-wastewater", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "materials-battery-recycling", "nlp-lowresource-mt", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.827.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    1.1742,  // chat.sim_prev_query
    -3.9182, // chat.sim_prev_turn
    -3.4569, // chat.sim_prev_reply
    3.5012,  // chat.sim_unit
    -0.0048, // chat.tail_sim_unit
    3.4535,  // chat.tail_gap
    0.0000,  // chat.return_gain
    -1.9177, // chat.reply_sim_unit
    -1.4484, // chat.reply_sim_prev_query
    0.3499,  // chat.prev_shift
    1.6065,  // chat.prev_recap
    0.0000,  // chat.prev_table
    -0.0263, // chat.novelty_earlier
    0.8926,  // chat.novelty_last_pair
    0.8860,  // chat.reply_novelty
    -0.9790, // chat.previous_asked
    1.5703,  // chat.user_asks
    0.2246,  // chat.answer_opening
    0.3722,  // chat.user_length
    -0.1233, // chat.stuck_cue
    -0.8637, // chat.drill_cue
    1.2639,  // chat.pivot_cue
    -0.9384, // chat.wrap_up_latest
    -2.2771, // chat.unit_closed
    0.0520,  // chat.thanks_previous
    -0.4432, // chat.reference_cue
    -0.2441, // chat.shared_figure
    -0.7447, // chat.open_loop
    -0.5511, // chat.return_overlap
    -5.4176, // chat.no_earlier
    -0.7476, // research.sim_prev_query
    -0.3552, // research.sim_prev_turn
    -0.3330, // research.sim_prev_reply
    -1.4405, // research.sim_unit
    4.5540,  // research.tail_sim_unit
    -4.4394, // research.tail_gap
    0.0000,  // research.return_gain
    -3.6525, // research.reply_sim_unit
    -3.5469, // research.reply_sim_prev_query
    1.9060,  // research.prev_shift
    0.2960,  // research.prev_recap
    2.7038,  // research.prev_table
    2.0686,  // research.novelty_earlier
    -0.0086, // research.novelty_last_pair
    2.1828,  // research.reply_novelty
    -0.7679, // research.previous_asked
    3.6011,  // research.user_asks
    2.0000,  // research.answer_opening
    1.4987,  // research.user_length
    0.0835,  // research.stuck_cue
    0.7913,  // research.drill_cue
    0.6205,  // research.pivot_cue
    0.3596,  // research.wrap_up_latest
    4.1109,  // research.unit_closed
    1.5637,  // research.thanks_previous
    -1.5302, // research.reference_cue
    0.2893,  // research.shared_figure
    -1.8489, // research.open_loop
    -1.0114, // research.return_overlap
    -5.4448, // research.no_earlier
    -8.9795, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.7333;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.3404;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2220;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.5300;
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
