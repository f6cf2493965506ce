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
// ["clinpharm-anticoag", "epi-wastewater", "fisheries-stock", "genomics-polygenic", "glaciology-antarctic", "hydro-groundwater", "labour-minimum-wage", "macro-housing", "materials-battery-recycling", "nlp-lowresource-mt", "paleo-speleothems", "psycholing-reading", "reef-bleaching", "robotics-grasping", "seismo-induced", "soil-carbon", "vaccine-trial-design", "volcano-hazard", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.0001 and prior shift 2.7 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.841.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    -0.1537, // all.sim_prev_query
    -1.8335, // all.sim_prev_turn
    -1.6295, // all.sim_prev_reply
    2.0368,  // all.sim_unit
    1.3237,  // all.tail_sim_unit
    1.4830,  // all.tail_gap
    0.1261,  // all.return_gain
    0.8558,  // all.reply_sim_unit
    -1.4121, // all.reply_sim_prev_query
    0.0349,  // all.prev_shift
    1.8008,  // all.prev_recap
    2.1304,  // all.prev_table
    0.1421,  // all.sent_prev_reply
    -2.5585, // all.tail_sent_prev_reply
    -3.6841, // all.reply_sent_prev_reply
    -0.5608, // all.sent_unit
    0.4418,  // all.novelty_earlier
    0.3546,  // all.novelty_last_pair
    0.9151,  // all.reply_novelty
    -0.9065, // all.previous_asked
    1.5683,  // all.user_asks
    0.2000,  // all.answer_opening
    0.3877,  // all.user_length
    -0.1801, // all.stuck_cue
    -0.8916, // all.drill_cue
    0.5689,  // all.pivot_cue
    -0.6594, // all.wrap_up_latest
    -0.7559, // all.unit_closed
    0.0547,  // all.thanks_previous
    -0.4742, // all.reference_cue
    -0.4142, // all.shared_figure
    -0.6004, // all.open_loop
    -0.4315, // all.return_overlap
    -6.5261, // all.no_earlier
    -2.3597, // research.sim_prev_query
    0.6415,  // research.sim_prev_turn
    0.7775,  // research.sim_prev_reply
    -1.1827, // research.sim_unit
    2.9887,  // research.tail_sim_unit
    -3.1327, // research.tail_gap
    0.1261,  // research.return_gain
    -0.5253, // research.reply_sim_unit
    -0.4263, // research.reply_sim_prev_query
    0.1816,  // research.prev_shift
    0.2261,  // research.prev_recap
    2.1304,  // research.prev_table
    -0.1105, // research.sent_prev_reply
    2.9304,  // research.tail_sent_prev_reply
    -2.6601, // research.reply_sent_prev_reply
    -0.7631, // research.sent_unit
    1.6575,  // research.novelty_earlier
    -0.0971, // research.novelty_last_pair
    3.2189,  // research.reply_novelty
    -0.1343, // research.previous_asked
    -1.1676, // research.user_asks
    0.2751,  // research.answer_opening
    1.0520,  // research.user_length
    -0.7838, // research.stuck_cue
    1.5189,  // research.drill_cue
    0.4664,  // research.pivot_cue
    0.9138,  // research.wrap_up_latest
    3.3619,  // research.unit_closed
    0.7287,  // research.thanks_previous
    -0.8880, // research.reference_cue
    0.1677,  // research.shared_figure
    0.2313,  // research.open_loop
    -0.8505, // research.return_overlap
    -0.3376, // research.no_earlier
    -6.6934, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -1.3445;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.1903;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2104;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.3477;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 2.7;
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
