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

// The fitted constants are whatever the fit gives, to four decimals: one may land on a
// mathematical constant's rounding by chance (head v7's bias is −0.5236 ≈ −π/6).
#![allow(clippy::approx_constant)]

use super::features::N_FEATURES;
use crate::offline::sigmoid;

// FITTED-CONSTANTS-BEGIN
// Fitted by `cargo run --release -p adaptive-compaction-decision-client --features embedding,eval
// --example fit_embedding_model -- --write`: weights on 1177 TIAGE train cases + sessions
// ["biomed-fmt", "clinpharm-anticoag", "epi-wastewater", "fisheries-stock", "genomics-polygenic", "glaciology-antarctic", "hospital-amr", "hydro-groundwater", "labour-minimum-wage", "macro-housing", "materials-battery-recycling", "nlp-lowresource-mt", "paleo-speleothems", "perovskite-stability", "psycholing-reading", "qec-surface-code", "reef-bleaching", "robotics-grasping", "seismo-induced", "socsci-remote-work", "soil-carbon", "systems-ssd-storage", "urban-heat-islands", "vaccine-trial-design", "volcano-hazard", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.0001 and prior shift 3.2 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.840.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    -0.0185, // all.sim_prev_query
    -1.2980, // all.sim_prev_turn
    -0.5034, // all.sim_prev_reply
    0.9185,  // all.sim_unit
    1.9084,  // all.tail_sim_unit
    -0.0588, // all.tail_gap
    1.6396,  // all.return_gain
    -2.0695, // all.reply_sim_unit
    -0.9364, // all.reply_sim_prev_query
    0.0100,  // all.prev_shift
    0.7078,  // all.prev_recap
    1.2838,  // all.prev_table
    0.2819,  // all.sent_prev_reply
    -3.1849, // all.tail_sent_prev_reply
    -2.0761, // all.reply_sent_prev_reply
    -1.2982, // all.sent_unit
    0.0526,  // all.novelty_earlier
    0.9826,  // all.novelty_last_pair
    0.6780,  // all.reply_novelty
    -0.9094, // all.previous_asked
    1.6210,  // all.user_asks
    0.2051,  // all.answer_opening
    0.3598,  // all.user_length
    -0.1267, // all.stuck_cue
    -1.0290, // all.drill_cue
    0.0414,  // all.pivot_cue
    -0.7855, // all.wrap_up_latest
    -0.4935, // all.unit_closed
    0.0004,  // all.thanks_previous
    -0.4308, // all.reference_cue
    -0.4795, // all.shared_figure
    -0.5479, // all.open_loop
    0.1103,  // all.return_overlap
    -3.8201, // all.no_earlier
    -0.1635, // research.sim_prev_query
    1.6438,  // research.sim_prev_turn
    2.1953,  // research.sim_prev_reply
    -1.3933, // research.sim_unit
    1.7738,  // research.tail_sim_unit
    -1.7414, // research.tail_gap
    3.5401,  // research.return_gain
    -3.8966, // research.reply_sim_unit
    1.6132,  // research.reply_sim_prev_query
    3.4627,  // research.prev_shift
    4.6856,  // research.prev_recap
    1.2838,  // research.prev_table
    0.6753,  // research.sent_prev_reply
    2.9909,  // research.tail_sent_prev_reply
    0.5573,  // research.reply_sent_prev_reply
    -2.8741, // research.sent_unit
    -0.2002, // research.novelty_earlier
    0.2430,  // research.novelty_last_pair
    3.2473,  // research.reply_novelty
    -0.3273, // research.previous_asked
    -1.0927, // research.user_asks
    -1.1904, // research.answer_opening
    0.2205,  // research.user_length
    -0.3466, // research.stuck_cue
    2.2371,  // research.drill_cue
    0.1256,  // research.pivot_cue
    1.3863,  // research.wrap_up_latest
    3.0922,  // research.unit_closed
    0.4831,  // research.thanks_previous
    0.0199,  // research.reference_cue
    -0.2109, // research.shared_figure
    0.0962,  // research.open_loop
    0.9316,  // research.return_overlap
    2.4529,  // research.no_earlier
    -9.1083, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -0.7339;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.2433;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2239;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.4042;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 3.2;
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
