//! The research prior, chosen inside the training folds only.
//!
//! Platt scaling calibrates p to the training sessions' base rate of pivots (about one turn
//! in six), and at the spec's fixed τ = 0.75 a calibrated p rarely clears it. The head keeps
//! its calibration and adds one shift δ to the logit in a research context: p is then the
//! probability of a pivot under prior odds e^δ times the training sessions' (δ = 1.6 is about
//! a balanced prior). δ is chosen by an inner leave-one-session-out over the **training**
//! sessions of a fold: every inner session is scored by a head fitted without it (and
//! without the outer session), the inner scores are pooled, and δ is the one of [`GRID`]
//! with the highest recall + specificity at τ (ties: the middle of the best run). The
//! research block's penalty (how far research weights may move from the shared ones) is
//! chosen the same way, from [`RESEARCH_L2_GRID`], with the highest score at its best δ
//! (ties: the smaller penalty). The session the fold reports is never read by the choice.

use crate::logistic::Head;
use crate::store::Row;
use decision_client::embedding::features::N_FEATURES;

use crate::{Data, Reg, TAU};

/// The research block's penalties the inner leave-one-session-out chooses from.
pub(crate) const RESEARCH_L2_GRID: [f64; 3] = [0.0001, 0.001, 0.01];

/// The shifts tried, −1 to 5 in steps of 0.1.
pub(crate) fn grid() -> impl Iterator<Item = f64> {
    (-10..=50).map(|i| f64::from(i) / 10.0)
}

/// recall + specificity at τ of `scored` (logit, research, y) shifted by `delta`.
fn balanced(scored: &[(f64, f64, bool)], delta: f64) -> f64 {
    let (mut tp, mut pos, mut tn, mut neg) = (0.0, 0.0, 0.0, 0.0);
    for &(z, research, y) in scored {
        let p = decision_client::offline::sigmoid(z + delta * research);
        if y {
            pos += 1.0;
            tp += f64::from(u8::from(p >= TAU));
        } else {
            neg += 1.0;
            tn += f64::from(u8::from(p < TAU));
        }
    }
    let rate = |k: f64, n: f64| if n > 0.0 { k / n } else { 0.0 };
    rate(tp, pos) + rate(tn, neg)
}

/// The δ of [`grid`] with the highest [`balanced`] score; the middle of the best run.
pub(crate) fn choose(scored: &[(f64, f64, bool)]) -> f64 {
    let scores: Vec<(f64, f64)> = grid().map(|d| (d, balanced(scored, d))).collect();
    let best = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
    // The longest run of consecutive grid points at the best score; its middle.
    let (mut run, mut longest) = (Vec::new(), Vec::new());
    for &(d, s) in &scores {
        if (s - best).abs() < 1e-12 {
            run.push(d);
            if run.len() > longest.len() {
                longest = run.clone();
            }
        } else {
            run.clear();
        }
    }
    longest.get(longest.len() / 2).copied().unwrap_or(0.0)
}

impl Data {
    /// The head fitted on every session but `left_out`, with the research prior chosen by
    /// the inner leave-one-session-out over those same sessions.
    pub(crate) fn nested_head(
        &self,
        left_out: &[&str],
        x: fn(&Row) -> &[f64],
        weight: f64,
        reg: Reg,
    ) -> Head {
        let training: Vec<&str> = self
            .sessions
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !left_out.contains(n))
            .collect();
        if self.no_prior {
            let mut head = self.head_without(left_out, x, weight, reg);
            head.research_l2 = reg.research;
            return head;
        }
        // The research block's penalty is chosen with δ when the features have that block.
        let candidates: Vec<f64> = if x(&self.train[0]).len() == N_FEATURES {
            RESEARCH_L2_GRID.to_vec()
        } else {
            vec![reg.research]
        };
        let mut best: Option<(f64, Reg, f64)> = None;
        for research in candidates {
            let reg = Reg { research, ..reg };
            let mut inner = Vec::new();
            for s in &training {
                let mut out = left_out.to_vec();
                out.push(s);
                let head = self.head_without(&out, x, weight, reg);
                let rows = self
                    .sessions
                    .iter()
                    .filter(|(n, _)| n == s)
                    .flat_map(|(_, rows)| rows);
                inner.extend(rows.map(|r| (head.logit(r, x), r.research, r.y)));
            }
            let delta = choose(&inner);
            let score = balanced(&inner, delta);
            // Ties keep the smaller penalty (tried first).
            if best.is_none_or(|(b, _, _)| score > b + 1e-12) {
                best = Some((score, reg, delta));
            }
        }
        let (_, reg, delta) = best.unwrap_or((0.0, reg, 0.0));
        let mut head = self.head_without(left_out, x, weight, reg);
        head.shift = delta;
        head.research_l2 = reg.research;
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shift_lifts_pivots_over_tau_and_stops_before_the_rest() {
        // Research pivots at logit 0, the rest at −3: any δ in (1.1, 4.1) separates them at
        // τ = 0.75 (logit 1.0986); the middle of that run is chosen.
        let scored = [(0.0, 1.0, true), (-3.0, 1.0, false), (-3.0, 1.0, false)];
        let d = choose(&scored);
        assert!((d - 2.6).abs() < 0.11, "{d}");
    }
}
