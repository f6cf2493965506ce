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
// ["clinpharm-anticoag", "epi-wastewater", "fisheries-stock", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "labour-minimum-wage", "materials-battery-recycling", "nlp-lowresource-mt", "psycholing-reading", "reef-bleaching", "robotics-grasping", "seismo-induced", "soil-carbon", "volcano-hazard", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.0001 and prior shift 2.4 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.842.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    0.1280,  // all.sim_prev_query
    -2.1829, // all.sim_prev_turn
    -1.3775, // all.sim_prev_reply
    2.4123,  // all.sim_unit
    0.7691,  // all.tail_sim_unit
    1.1160,  // all.tail_gap
    0.1113,  // all.return_gain
    0.8374,  // all.reply_sim_unit
    -1.5388, // all.reply_sim_prev_query
    -0.0121, // all.prev_shift
    1.8809,  // all.prev_recap
    2.2248,  // all.prev_table
    0.1110,  // all.sent_prev_reply
    -2.5191, // all.tail_sent_prev_reply
    -3.7161, // all.reply_sent_prev_reply
    -0.6666, // all.sent_unit
    0.5447,  // all.novelty_earlier
    0.1755,  // all.novelty_last_pair
    0.8505,  // all.reply_novelty
    -0.9021, // all.previous_asked
    1.5831,  // all.user_asks
    0.1946,  // all.answer_opening
    0.3995,  // all.user_length
    -0.1721, // all.stuck_cue
    -0.9041, // all.drill_cue
    0.4776,  // all.pivot_cue
    -0.6638, // all.wrap_up_latest
    -0.9391, // all.unit_closed
    0.0503,  // all.thanks_previous
    -0.4809, // all.reference_cue
    -0.4767, // all.shared_figure
    -0.6435, // all.open_loop
    -0.2438, // all.return_overlap
    -5.9655, // all.no_earlier
    -1.6745, // research.sim_prev_query
    0.9568,  // research.sim_prev_turn
    1.4961,  // research.sim_prev_reply
    -1.1357, // research.sim_unit
    1.6964,  // research.tail_sim_unit
    -3.2653, // research.tail_gap
    0.1113,  // research.return_gain
    -0.9125, // research.reply_sim_unit
    -0.8103, // research.reply_sim_prev_query
    -0.3281, // research.prev_shift
    0.9178,  // research.prev_recap
    2.2248,  // research.prev_table
    0.0958,  // research.sent_prev_reply
    3.2930,  // research.tail_sent_prev_reply
    -2.5239, // research.reply_sent_prev_reply
    -1.0241, // research.sent_unit
    2.0023,  // research.novelty_earlier
    -0.1603, // research.novelty_last_pair
    3.2021,  // research.reply_novelty
    -0.1330, // research.previous_asked
    -1.3629, // research.user_asks
    0.4799,  // research.answer_opening
    0.8579,  // research.user_length
    -0.5686, // research.stuck_cue
    1.8229,  // research.drill_cue
    0.4248,  // research.pivot_cue
    1.4004,  // research.wrap_up_latest
    3.4196,  // research.unit_closed
    0.6859,  // research.thanks_previous
    -0.9791, // research.reference_cue
    0.0215,  // research.shared_figure
    -0.4306, // research.open_loop
    -0.4868, // research.return_overlap
    -1.1364, // research.no_earlier
    -6.2553, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.1292;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.1910;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2178;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.3513;
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
