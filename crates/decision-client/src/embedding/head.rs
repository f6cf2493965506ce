//! The embedding model's decision head: z = bias + Σ wᵢ·xᵢ over [`super::features`], then
//! p = σ(A·z + B + (C + δ)·research): Platt scaling with its own intercept shift C in a
//! research context, plus the research prior δ.
//!
//! Fitted by logistic regression (L2; the research block's own penalty) on the TIAGE
//! **train** split plus the labelled research sessions, Platt's A, B and C on the TIAGE
//! **dev** split plus the same sessions; the TIAGE test split is never read by the fit.
//!
//! **What p means in a research context.** Platt calibrates p to the training sessions' base
//! rate (about one pivot in six turns), and at the spec's fixed τ = 0.75 a calibrated p almost
//! never clears τ on a research pivot. δ ([`RESEARCH_PRIOR_SHIFT`]) raises the prior odds of a
//! pivot by e^δ: p is the probability of a pivot *if pivots were e^δ times as common*, so
//! p ≥ 0.75 there means calibrated odds ≥ 3·e^−δ. It is not a calibrated probability (its
//! expected calibration error on the sessions is about 0.2, against about 0.07 without δ);
//! outside a research context (chit-chat) nothing changes. δ and the research block's penalty
//! are chosen by leave-one-session-out over the sessions (the highest recall + specificity at
//! τ), never on the session being scored. Reproducible with `cargo run --release -p
//! adaptive-compaction-decision-client --features embedding,eval --example
//! fit_embedding_model -- --write` (docs/DECISION-QUALITY.md has the figures).

use super::features::N_FEATURES;
use crate::offline::sigmoid;

// FITTED-CONSTANTS-BEGIN
// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding,eval
// --example fit_embedding_model -- --write`: weights on 1177 TIAGE train cases + sessions
// ["clinpharm-anticoag", "epi-wastewater", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "materials-battery-recycling", "nlp-lowresource-mt", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.001 and prior shift 2.9 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.812.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    0.8516,  // all.sim_prev_query
    -3.6552, // all.sim_prev_turn
    -3.1400, // all.sim_prev_reply
    2.5332,  // all.sim_unit
    1.7150,  // all.tail_sim_unit
    1.5757,  // all.tail_gap
    0.0000,  // all.return_gain
    -2.4312, // all.reply_sim_unit
    -1.8447, // all.reply_sim_prev_query
    0.3400,  // all.prev_shift
    1.5004,  // all.prev_recap
    3.0774,  // all.prev_table
    0.4319,  // all.novelty_earlier
    0.5521,  // all.novelty_last_pair
    0.8168,  // all.reply_novelty
    -0.9965, // all.previous_asked
    1.6158,  // all.user_asks
    0.2248,  // all.answer_opening
    0.5080,  // all.user_length
    -0.0392, // all.stuck_cue
    -0.0306, // all.drill_cue
    0.5377,  // all.pivot_cue
    -0.8840, // all.wrap_up_latest
    1.4000,  // all.unit_closed
    0.3279,  // all.thanks_previous
    -0.4672, // all.reference_cue
    -0.1950, // all.shared_figure
    -0.8313, // all.open_loop
    -0.5392, // all.return_overlap
    -5.9065, // all.no_earlier
    -0.5293, // research.sim_prev_query
    0.0451,  // research.sim_prev_turn
    0.4622,  // research.sim_prev_reply
    -0.1119, // research.sim_unit
    1.5519,  // research.tail_sim_unit
    -1.4048, // research.tail_gap
    0.0000,  // research.return_gain
    -0.5766, // research.reply_sim_unit
    -0.8269, // research.reply_sim_prev_query
    0.3109,  // research.prev_shift
    -0.2531, // research.prev_recap
    0.3077,  // research.prev_table
    0.6182,  // research.novelty_earlier
    0.2840,  // research.novelty_last_pair
    0.6899,  // research.reply_novelty
    -0.0320, // research.previous_asked
    0.7706,  // research.user_asks
    0.8249,  // research.answer_opening
    1.0732,  // research.user_length
    0.0986,  // research.stuck_cue
    0.8575,  // research.drill_cue
    0.5083,  // research.pivot_cue
    0.0665,  // research.wrap_up_latest
    1.4569,  // research.unit_closed
    0.3350,  // research.thanks_previous
    -0.9194, // research.reference_cue
    0.0219,  // research.shared_figure
    -0.5578, // research.open_loop
    -0.2325, // research.return_overlap
    0.3220,  // research.no_earlier
    -7.0074, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.9840;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.3413;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2122;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.5616;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 2.9;
// FITTED-CONSTANTS-END

/// z with the given weights and bias.
pub fn logit(x: &[f64; N_FEATURES], weights: &[f64; N_FEATURES], bias: f64) -> f64 {
    bias + weights.iter().zip(x).map(|(w, x)| w * x).sum::<f64>()
}

/// p with the embedded constants; `research` is the state's research context.
pub fn probability(x: &[f64; N_FEATURES], research: bool) -> f64 {
    let shift = if research {
        PLATT_RESEARCH + RESEARCH_PRIOR_SHIFT
    } else {
        0.0
    };
    sigmoid(PLATT_A * logit(x, &WEIGHTS, BIAS) + PLATT_B + shift)
}
