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
// ["clinpharm-anticoag", "epi-wastewater", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "labour-minimum-wage", "materials-battery-recycling", "nlp-lowresource-mt", "robotics-grasping", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.001 and prior shift 2.4 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.812.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    0.9785,  // all.sim_prev_query
    -3.5612, // all.sim_prev_turn
    -2.9665, // all.sim_prev_reply
    2.7896,  // all.sim_unit
    1.0041,  // all.tail_sim_unit
    0.8322,  // all.tail_gap
    0.1435,  // all.return_gain
    -2.5694, // all.reply_sim_unit
    -1.8068, // all.reply_sim_prev_query
    0.2923,  // all.prev_shift
    1.6018,  // all.prev_recap
    3.2183,  // all.prev_table
    0.1516,  // all.novelty_earlier
    0.8982,  // all.novelty_last_pair
    0.8660,  // all.reply_novelty
    -1.0018, // all.previous_asked
    1.5785,  // all.user_asks
    0.2197,  // all.answer_opening
    0.5017,  // all.user_length
    -0.0500, // all.stuck_cue
    0.0385,  // all.drill_cue
    0.5819,  // all.pivot_cue
    -0.9423, // all.wrap_up_latest
    1.3650,  // all.unit_closed
    0.2225,  // all.thanks_previous
    -0.4936, // all.reference_cue
    -0.4313, // all.shared_figure
    -0.8323, // all.open_loop
    -0.7908, // all.return_overlap
    -6.1796, // all.no_earlier
    -0.4593, // research.sim_prev_query
    0.0944,  // research.sim_prev_turn
    0.5208,  // research.sim_prev_reply
    -0.1903, // research.sim_unit
    1.2477,  // research.tail_sim_unit
    -1.4003, // research.tail_gap
    0.0143,  // research.return_gain
    -0.7880, // research.reply_sim_unit
    -0.8091, // research.reply_sim_prev_query
    0.2715,  // research.prev_shift
    -0.0703, // research.prev_recap
    0.3218,  // research.prev_table
    0.7153,  // research.novelty_earlier
    0.4524,  // research.novelty_last_pair
    0.9391,  // research.reply_novelty
    -0.0306, // research.previous_asked
    -0.2860, // research.user_asks
    0.9066,  // research.answer_opening
    0.9751,  // research.user_length
    0.0164,  // research.stuck_cue
    0.8697,  // research.drill_cue
    0.4119,  // research.pivot_cue
    -0.0064, // research.wrap_up_latest
    1.2929,  // research.unit_closed
    0.1810,  // research.thanks_previous
    -1.2362, // research.reference_cue
    -0.0456, // research.shared_figure
    -0.5677, // research.open_loop
    -0.2961, // research.return_overlap
    0.0880,  // research.no_earlier
    -5.7147, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.9682;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.2877;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2077;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.4814;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 2.4;
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
