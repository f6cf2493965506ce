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
// ["clinpharm-anticoag", "epi-wastewater", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "labour-minimum-wage", "materials-battery-recycling", "nlp-lowresource-mt", "reef-bleaching", "robotics-grasping", "volcano-hazard", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.001 and prior shift 2.5 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.832.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    0.0585,  // all.sim_prev_query
    -2.3100, // all.sim_prev_turn
    -0.9266, // all.sim_prev_reply
    2.2686,  // all.sim_unit
    1.5472,  // all.tail_sim_unit
    -0.6190, // all.tail_gap
    0.1155,  // all.return_gain
    0.5184,  // all.reply_sim_unit
    -1.9308, // all.reply_sim_prev_query
    -0.0598, // all.prev_shift
    1.8834,  // all.prev_recap
    3.2157,  // all.prev_table
    -0.1902, // all.sent_prev_reply
    -2.5761, // all.tail_sent_prev_reply
    -4.1801, // all.reply_sent_prev_reply
    -0.3609, // all.sent_unit
    0.4797,  // all.novelty_earlier
    0.3744,  // all.novelty_last_pair
    0.7658,  // all.reply_novelty
    -0.9225, // all.previous_asked
    1.6073,  // all.user_asks
    0.1991,  // all.answer_opening
    0.5462,  // all.user_length
    -0.1132, // all.stuck_cue
    -0.1821, // all.drill_cue
    0.1717,  // all.pivot_cue
    -0.9861, // all.wrap_up_latest
    1.4238,  // all.unit_closed
    0.2920,  // all.thanks_previous
    -0.5294, // all.reference_cue
    -0.5136, // all.shared_figure
    -0.8348, // all.open_loop
    -0.6647, // all.return_overlap
    -6.6470, // all.no_earlier
    -0.3968, // research.sim_prev_query
    0.1441,  // research.sim_prev_turn
    0.3996,  // research.sim_prev_reply
    -0.0262, // research.sim_unit
    1.1865,  // research.tail_sim_unit
    -1.2543, // research.tail_gap
    0.0116,  // research.return_gain
    -0.8392, // research.reply_sim_unit
    -0.7855, // research.reply_sim_prev_query
    0.5496,  // research.prev_shift
    0.1201,  // research.prev_recap
    0.3216,  // research.prev_table
    0.0477,  // research.sent_prev_reply
    1.0831,  // research.tail_sent_prev_reply
    -1.1352, // research.reply_sent_prev_reply
    0.0847,  // research.sent_unit
    0.6119,  // research.novelty_earlier
    0.4337,  // research.novelty_last_pair
    1.0223,  // research.reply_novelty
    -0.0325, // research.previous_asked
    -0.7994, // research.user_asks
    0.9345,  // research.answer_opening
    0.9444,  // research.user_length
    -0.0521, // research.stuck_cue
    0.7940,  // research.drill_cue
    0.2649,  // research.pivot_cue
    -0.0158, // research.wrap_up_latest
    1.1329,  // research.unit_closed
    0.3787,  // research.thanks_previous
    -1.0303, // research.reference_cue
    0.0122,  // research.shared_figure
    -0.7167, // research.open_loop
    -0.1213, // research.return_overlap
    -0.0783, // research.no_earlier
    -4.7779, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.2888;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.3894;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2472;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.5665;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 2.5;
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
