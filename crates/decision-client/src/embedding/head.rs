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
// ["clinpharm-anticoag", "epi-wastewater", "fisheries-stock", "genomics-polygenic", "glaciology-antarctic", "hospital-amr", "hydro-groundwater", "labour-minimum-wage", "macro-housing", "materials-battery-recycling", "nlp-lowresource-mt", "paleo-speleothems", "perovskite-stability", "psycholing-reading", "qec-surface-code", "reef-bleaching", "robotics-grasping", "seismo-induced", "soil-carbon", "urban-heat-islands", "vaccine-trial-design", "volcano-hazard", "archaeo-radiocarbon", "astro-exoplanets", "ecology-pollinators", "neuro-fmri"] (weight 5, L2 0.0001; research block L2 0.0001 and prior shift 3.4 chosen by
// leave-one-session-out over them), Platt on 397 TIAGE dev cases + the same sessions.
// TIAGE test AUC 0.839.
/// Fitted weights, same order as [`super::features::feature_names`].
#[allow(clippy::approx_constant)]
pub const WEIGHTS: [f64; N_FEATURES] = [
    0.0055,  // all.sim_prev_query
    -1.3851, // all.sim_prev_turn
    -0.8308, // all.sim_prev_reply
    1.1475,  // all.sim_unit
    1.8774,  // all.tail_sim_unit
    0.0210,  // all.tail_gap
    1.7356,  // all.return_gain
    -2.2121, // all.reply_sim_unit
    -1.0564, // all.reply_sim_prev_query
    -0.0269, // all.prev_shift
    0.7672,  // all.prev_recap
    1.3417,  // all.prev_table
    0.3847,  // all.sent_prev_reply
    -3.0379, // all.tail_sent_prev_reply
    -1.9803, // all.reply_sent_prev_reply
    -1.3582, // all.sent_unit
    -0.0717, // all.novelty_earlier
    1.0566,  // all.novelty_last_pair
    0.5357,  // all.reply_novelty
    -0.9065, // all.previous_asked
    1.6286,  // all.user_asks
    0.2068,  // all.answer_opening
    0.3622,  // all.user_length
    -0.1228, // all.stuck_cue
    -1.0469, // all.drill_cue
    0.2827,  // all.pivot_cue
    -0.8349, // all.wrap_up_latest
    -0.7580, // all.unit_closed
    -0.0084, // all.thanks_previous
    -0.4327, // all.reference_cue
    -0.4631, // all.shared_figure
    -0.5550, // all.open_loop
    -0.0984, // all.return_overlap
    -3.8963, // all.no_earlier
    0.1273,  // research.sim_prev_query
    1.3588,  // research.sim_prev_turn
    1.0585,  // research.sim_prev_reply
    -1.1468, // research.sim_unit
    1.9470,  // research.tail_sim_unit
    -1.7946, // research.tail_gap
    3.8291,  // research.return_gain
    -4.3027, // research.reply_sim_unit
    1.1038,  // research.reply_sim_prev_query
    3.3696,  // research.prev_shift
    5.6195,  // research.prev_recap
    1.3417,  // research.prev_table
    0.1012,  // research.sent_prev_reply
    3.6553,  // research.tail_sent_prev_reply
    1.1820,  // research.reply_sent_prev_reply
    -3.6159, // research.sent_unit
    -0.0247, // research.novelty_earlier
    0.4222,  // research.novelty_last_pair
    2.0851,  // research.reply_novelty
    -0.3711, // research.previous_asked
    -1.0499, // research.user_asks
    -0.9952, // research.answer_opening
    0.5225,  // research.user_length
    -0.5049, // research.stuck_cue
    2.2911,  // research.drill_cue
    0.2936,  // research.pivot_cue
    1.3818,  // research.wrap_up_latest
    2.7692,  // research.unit_closed
    0.2600,  // research.thanks_previous
    -0.2210, // research.reference_cue
    -0.1422, // research.shared_figure
    0.3521,  // research.open_loop
    0.4968,  // research.return_overlap
    2.3135,  // research.no_earlier
    -9.1737, // research_context
];
/// Fitted with [`WEIGHTS`].
pub const BIAS: f64 = -0.5236;
/// Platt scaling slope.
pub const PLATT_A: f64 = 1.2677;
/// Platt scaling intercept.
pub const PLATT_B: f64 = -0.2286;
/// Platt scaling's shift in a research context.
pub const PLATT_RESEARCH: f64 = 0.4296;
/// The research prior's shift of the logit, chosen by leave-one-session-out over the
/// sessions (balanced recall and specificity at τ).
pub const RESEARCH_PRIOR_SHIFT: f64 = 3.4;
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
