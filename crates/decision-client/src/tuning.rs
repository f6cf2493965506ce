//! Choosing τ from recorded decisions (shadow mode): the threshold that maximizes F1, the
//! lowest threshold that reaches a target precision, and the reliability diagram's bins.
//! Pure functions over `(p, label)` pairs; `compaction tune` feeds them recorded p, never a
//! fresh probe.

use crate::eval::accuracy_and_f1;

/// A threshold and what it gives on the scored pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Operating {
    /// τ: p ≥ τ means COMPRESS.
    pub threshold: f64,
    /// Precision of COMPRESS at τ (1.0 when nothing is predicted).
    pub precision: f64,
    /// Recall of the labelled pivots at τ.
    pub recall: f64,
    /// F1 at τ.
    pub f1: f64,
}

/// The operating point at `threshold`.
pub fn operating_at(scored: &[(f64, bool)], threshold: f64) -> Operating {
    let tp = scored.iter().filter(|(p, y)| *p >= threshold && *y).count();
    let predicted = scored.iter().filter(|(p, _)| *p >= threshold).count();
    let positives = scored.iter().filter(|(_, y)| *y).count();
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    Operating {
        threshold,
        precision: ratio(tp, predicted),
        recall: if positives == 0 {
            0.0
        } else {
            ratio(tp, positives)
        },
        f1: accuracy_and_f1(scored, threshold).1,
    }
}

/// The candidate thresholds: every distinct recorded p, ascending.
fn candidates(scored: &[(f64, bool)]) -> Vec<f64> {
    let mut thresholds: Vec<f64> = scored.iter().map(|(p, _)| *p).collect();
    thresholds.sort_by(f64::total_cmp);
    thresholds.dedup();
    thresholds
}

/// The threshold with the greatest F1 (ties to the higher threshold: fewer compactions);
/// `None` without a labelled pivot.
pub fn best_f1_threshold(scored: &[(f64, bool)]) -> Option<Operating> {
    if !scored.iter().any(|(_, y)| *y) {
        return None;
    }
    candidates(scored)
        .into_iter()
        .map(|t| operating_at(scored, t))
        .fold(None, |best: Option<Operating>, cur| match best {
            Some(b) if b.f1 > cur.f1 => Some(b),
            _ => Some(cur),
        })
}

/// The lowest threshold whose precision reaches `target` while still predicting a pivot (the
/// one with the most recall at that precision); `None` when no threshold reaches it.
pub fn threshold_for_precision(scored: &[(f64, bool)], target: f64) -> Option<Operating> {
    candidates(scored)
        .into_iter()
        .map(|t| operating_at(scored, t))
        .find(|o| o.precision >= target && o.recall > 0.0)
}

/// One bin of the reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReliabilityBin {
    /// The bin's lower edge.
    pub lower: f64,
    /// The bin's upper edge.
    pub upper: f64,
    /// Decisions whose p fell in the bin.
    pub count: usize,
    /// Their mean p (the bin's centre when empty).
    pub mean_probability: f64,
    /// The share labelled as pivots (0 when empty).
    pub observed_rate: f64,
}

/// The reliability diagram's `bins` equal-width bins over [0, 1] (the last one closed), the
/// same binning as [`crate::eval::ece`] with 10.
pub fn reliability(scored: &[(f64, bool)], bins: usize) -> Vec<ReliabilityBin> {
    let bins = bins.max(1);
    let mut acc = vec![(0usize, 0.0f64, 0usize); bins];
    for &(p, y) in scored {
        let b = ((p * bins as f64).floor() as usize).min(bins - 1);
        acc[b].0 += 1;
        acc[b].1 += p;
        acc[b].2 += usize::from(y);
    }
    acc.into_iter()
        .enumerate()
        .map(|(i, (count, sum, pos))| {
            let (lower, upper) = (i as f64 / bins as f64, (i + 1) as f64 / bins as f64);
            ReliabilityBin {
                lower,
                upper,
                count,
                mean_probability: if count == 0 {
                    (lower + upper) / 2.0
                } else {
                    sum / count as f64
                },
                observed_rate: if count == 0 {
                    0.0
                } else {
                    pos as f64 / count as f64
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCORED: [(f64, bool); 6] = [
        (0.1, false),
        (0.2, false),
        (0.55, true),
        (0.6, false),
        (0.8, true),
        (0.9, true),
    ];

    #[test]
    fn the_best_f1_threshold_is_found_by_hand_figures() {
        // τ = 0.55: tp 3, fp 1, fn 0 → F1 = 6/7; τ = 0.8: tp 2, fp 0, fn 1 → F1 = 0.8.
        let best = best_f1_threshold(&SCORED).unwrap();
        assert_eq!(best.threshold, 0.55);
        assert!((best.f1 - 6.0 / 7.0).abs() < 1e-12);
        assert_eq!(best.recall, 1.0);
        assert_eq!(best.precision, 0.75);
    }

    #[test]
    fn the_precision_target_takes_the_lowest_threshold_that_reaches_it() {
        let o = threshold_for_precision(&SCORED, 1.0).unwrap();
        assert_eq!(o.threshold, 0.8);
        assert!((o.recall - 2.0 / 3.0).abs() < 1e-12);
        let o = threshold_for_precision(&SCORED, 0.7).unwrap();
        assert_eq!(o.threshold, 0.55);
        assert!(threshold_for_precision(&[(0.9, false)], 0.5).is_none());
    }

    #[test]
    fn reliability_bins_count_mean_and_rate() {
        // Fifths: 0.1 | 0.2 | 0.55 | 0.6 | 0.8, 0.9 (an edge belongs to the bin above it).
        let bins = reliability(&SCORED, 5);
        let counts: Vec<usize> = bins.iter().map(|b| b.count).collect();
        assert_eq!(counts, [1, 1, 1, 1, 2]);
        assert_eq!(bins[2].observed_rate, 1.0);
        assert_eq!(bins[3].observed_rate, 0.0);
        assert!((bins[4].mean_probability - 0.85).abs() < 1e-12);
        // An empty bin sits at its centre with rate 0.
        let tenths = reliability(&SCORED, 10);
        assert_eq!(tenths[3].count, 0);
        assert!((tenths[3].mean_probability - 0.35).abs() < 1e-12);
    }

    #[test]
    fn without_a_pivot_there_is_no_best_threshold() {
        assert!(best_f1_threshold(&[(0.4, false)]).is_none());
    }
}
