//! Decision-quality evaluation: labelled cases, the two baselines, and the metrics that
//! `cargo xtask eval-decision` prints (ROC-AUC, accuracy and F1 at τ and at the best
//! threshold, Brier score, expected calibration error over 10 bins).
//!
//! A case file is JSON Lines, one `{"id", "earlier_discussion", "latest_turn", "label",
//! "source"}` object a line (`source` optional), the format of the TIAGE topic-shift set.
//! A case's split is the first `train`, `dev`, `validation` or `test` segment of its
//! dash-separated id; a file whose ids name no split is the single split `all`.

use std::fmt;
use std::path::Path;

use compaction_core::StateTurn;
use compaction_core::{DecisionModel, DecisionState, ProbeRequest};
use serde::Deserialize;

use crate::offline::lexical_novelty;
use crate::offline::text::pairs;

/// One labelled case.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Case {
    /// Unique id; its split segment groups the report.
    pub id: String,
    /// Earlier turns, serial Markdown.
    pub earlier_discussion: String,
    /// The latest turn, serial Markdown.
    pub latest_turn: String,
    /// True when compaction is warranted (the latest turn opens new ground).
    pub label: bool,
    /// Where the case came from.
    #[serde(default)]
    pub source: Option<String>,
}

impl Case {
    /// The decision state the case describes, with the structured turns read from the case
    /// file's serial Markdown (the case format is text; the engine's states carry their turns).
    pub fn state(&self) -> DecisionState {
        state_from_markdown(&self.earlier_discussion, &self.latest_turn)
    }

    /// The case's split (see the module docs).
    pub fn split(&self) -> &str {
        split_of(&self.id)
    }
}

/// A decision state from serial Markdown alone (a case file's text, a hand-written state):
/// the turns are read from the `**User**:` / `**Assistant**:` markers.
pub fn state_from_markdown(earlier_discussion: &str, latest_turn: &str) -> DecisionState {
    let mut turns: Vec<StateTurn> = pairs(earlier_discussion)
        .into_iter()
        .chain(pairs(latest_turn).into_iter().take(1))
        .map(|p| StateTurn {
            user: p.user,
            assistant: p.assistant,
            ..StateTurn::default()
        })
        .collect();
    let n = turns.len();
    for (i, t) in turns.iter_mut().enumerate() {
        t.age = n - 1 - i;
    }
    DecisionState {
        earlier_discussion: earlier_discussion.to_owned(),
        latest_turn: latest_turn.to_owned(),
        turns,
    }
}

/// A case file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not a case.
    #[error(
        "{path}:{line}: not a case ({reason}); expected {{\"id\", \"earlier_discussion\", \"latest_turn\", \"label\": bool}}"
    )]
    Parse {
        /// The file.
        path: String,
        /// The 1-based line.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// The file holds no case.
    #[error("{path}: holds no case")]
    Empty {
        /// The file.
        path: String,
    },
}

/// Parses JSON Lines text; `origin` names the file in errors. Blank lines are skipped.
pub fn parse_cases(text: &str, origin: &str) -> Result<Vec<Case>, EvalError> {
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: Case = serde_json::from_str(line).map_err(|e| EvalError::Parse {
            path: origin.to_owned(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        cases.push(case);
    }
    if cases.is_empty() {
        return Err(EvalError::Empty {
            path: origin.to_owned(),
        });
    }
    Ok(cases)
}

/// Reads a case file.
pub fn load_cases(path: &Path) -> Result<Vec<Case>, EvalError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: origin.clone(),
        source,
    })?;
    parse_cases(&text, &origin)
}

/// The split named in an id, or `all`.
pub fn split_of(id: &str) -> &str {
    id.split('-')
        .find(|s| matches!(*s, "train" | "dev" | "validation" | "test"))
        .unwrap_or("all")
}

/// Cases grouped by split, splits in order of first appearance.
pub fn by_split(cases: &[Case]) -> Vec<(String, Vec<&Case>)> {
    let mut groups: Vec<(String, Vec<&Case>)> = Vec::new();
    for case in cases {
        match groups.iter_mut().find(|(s, _)| s == case.split()) {
            Some((_, members)) => members.push(case),
            None => groups.push((case.split().to_owned(), vec![case])),
        }
    }
    groups
}

/// Baseline 1: the same probability for every case.
pub const CONSTANT_BASELINE: f64 = 0.5;

/// Baseline 2: plain lexical novelty, the share of the latest user message's content words
/// absent from the earlier discussion, used as p.
pub fn novelty_baseline(case: &Case) -> f64 {
    lexical_novelty(&case.state())
}

/// Asks `model` about every case, in order. A failed probe is `None`.
pub async fn score_cases(
    model: &dyn DecisionModel,
    slug: &str,
    cases: &[&Case],
) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(cases.len());
    for case in cases {
        let request = ProbeRequest::new(slug, case.state());
        out.push(model.decide(&request).await.ok().map(|a| a.probability));
    }
    out
}

/// Asks `model` about every decision state, in order. A failed probe (an error, or an answer
/// that is not a probability) is `None`.
pub async fn score_states(
    model: &dyn DecisionModel,
    slug: &str,
    states: &[&DecisionState],
) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(states.len());
    for state in states {
        let request = ProbeRequest::new(slug, (*state).clone());
        out.push(
            model
                .decide(&request)
                .await
                .ok()
                .map(|a| a.probability)
                .filter(|p| (0.0..=1.0).contains(p)),
        );
    }
    out
}

/// The figures of one split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metrics {
    /// Cases scored.
    pub n: usize,
    /// ROC-AUC (ties count half).
    pub auc: f64,
    /// Accuracy with COMPRESS at p ≥ τ.
    pub acc_at_tau: f64,
    /// F1 of the positive class at τ.
    pub f1_at_tau: f64,
    /// Share of positives (pivots) with p ≥ τ; 0 when there is none.
    pub recall_at_tau: f64,
    /// Share of negatives with p < τ; 0 when there is none.
    pub specificity_at_tau: f64,
    /// The best F1 over every threshold.
    pub f1_best: f64,
    /// The threshold giving `f1_best`.
    pub best_threshold: f64,
    /// Mean squared error of p.
    pub brier: f64,
    /// Expected calibration error over 10 equal-width bins.
    pub ece: f64,
}

impl fmt::Display for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "n={} auc={:.3} acc@tau={:.3} f1@tau={:.3} recall@tau={:.3} spec@tau={:.3} f1@best={:.3} brier={:.3} ece={:.3}",
            self.n,
            self.auc,
            self.acc_at_tau,
            self.f1_at_tau,
            self.recall_at_tau,
            self.specificity_at_tau,
            self.f1_best,
            self.brier,
            self.ece
        )
    }
}

/// ROC-AUC by the rank-sum formula with average ranks for ties; 0.5 when a class is absent.
pub fn roc_auc(scored: &[(f64, bool)]) -> f64 {
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = sorted.iter().filter(|(_, y)| *y).count();
    let negatives = sorted.len() - positives;
    if positives == 0 || negatives == 0 {
        return 0.5;
    }
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j share their average.
        let average = (i + 1 + j) as f64 / 2.0;
        rank_sum += average * sorted[i..j].iter().filter(|(_, y)| *y).count() as f64;
        i = j;
    }
    let p = positives as f64;
    (rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64)
}

/// (accuracy, F1) with positive predictions at p ≥ `threshold`.
pub fn accuracy_and_f1(scored: &[(f64, bool)], threshold: f64) -> (f64, f64) {
    let (mut tp, mut fp, mut tn, mut fn_) = (0usize, 0usize, 0usize, 0usize);
    for &(p, y) in scored {
        match (p >= threshold, y) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, false) => tn += 1,
            (false, true) => fn_ += 1,
        }
    }
    let n = scored.len().max(1) as f64;
    let f1 = if tp == 0 {
        0.0
    } else {
        2.0 * tp as f64 / (2 * tp + fp + fn_) as f64
    };
    ((tp + tn) as f64 / n, f1)
}

/// (recall, specificity) with positive predictions at p ≥ `threshold`: the share of
/// positives predicted positive and of negatives predicted negative (0 for an absent class).
pub fn recall_and_specificity(scored: &[(f64, bool)], threshold: f64) -> (f64, f64) {
    let share = |label: bool, predicted: bool| {
        let class: Vec<f64> = scored
            .iter()
            .filter(|(_, y)| *y == label)
            .map(|(p, _)| *p)
            .collect();
        if class.is_empty() {
            return 0.0;
        }
        let hits = class
            .iter()
            .filter(|p| (**p >= threshold) == predicted)
            .count();
        hits as f64 / class.len() as f64
    };
    (share(true, true), share(false, false))
}

/// The best F1 over every threshold equal to a score, and that threshold.
pub fn best_f1(scored: &[(f64, bool)]) -> (f64, f64) {
    let mut thresholds: Vec<f64> = scored.iter().map(|(p, _)| *p).collect();
    thresholds.sort_by(f64::total_cmp);
    thresholds.dedup();
    thresholds
        .into_iter()
        .map(|t| (accuracy_and_f1(scored, t).1, t))
        .fold(
            (0.0, 1.0),
            |best, cur| if cur.0 > best.0 { cur } else { best },
        )
}

/// Mean of (p − y)².
pub fn brier(scored: &[(f64, bool)]) -> f64 {
    let n = scored.len().max(1) as f64;
    scored
        .iter()
        .map(|&(p, y)| (p - f64::from(u8::from(y))).powi(2))
        .sum::<f64>()
        / n
}

/// Expected calibration error: 10 equal-width bins of p (the last one closed), each weighted
/// by its share of cases, |mean p − share of positives|.
pub fn ece(scored: &[(f64, bool)]) -> f64 {
    let mut bins = [(0usize, 0.0f64, 0usize); 10];
    for &(p, y) in scored {
        let b = ((p * 10.0).floor() as usize).min(9);
        bins[b].0 += 1;
        bins[b].1 += p;
        bins[b].2 += usize::from(y);
    }
    let n = scored.len().max(1) as f64;
    bins.iter()
        .filter(|(count, _, _)| *count > 0)
        .map(|&(count, sum, pos)| {
            let c = count as f64;
            (c / n) * (sum / c - pos as f64 / c).abs()
        })
        .sum()
}

/// Every figure for one split at threshold τ; `None` when nothing was scored.
pub fn metrics(scored: &[(f64, bool)], tau: f64) -> Option<Metrics> {
    if scored.is_empty() {
        return None;
    }
    let (acc_at_tau, f1_at_tau) = accuracy_and_f1(scored, tau);
    let (recall_at_tau, specificity_at_tau) = recall_and_specificity(scored, tau);
    let (f1_best, best_threshold) = best_f1(scored);
    Some(Metrics {
        n: scored.len(),
        auc: roc_auc(scored),
        acc_at_tau,
        f1_at_tau,
        recall_at_tau,
        specificity_at_tau,
        f1_best,
        best_threshold,
        brier: brier(scored),
        ece: ece(scored),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn auc_matches_hand_counts() {
        // Pairs (pos, neg): (0.9 > 0.1) (0.9 > 0.4) (0.35 > 0.1) (0.35 < 0.4) → 3 of 4.
        close(
            roc_auc(&[(0.9, true), (0.35, true), (0.1, false), (0.4, false)]),
            0.75,
        );
        // A tie counts half: (0.5 = 0.5) → 0.5, (0.5 > 0.2) → 1 → 0.75.
        close(roc_auc(&[(0.5, true), (0.5, false), (0.2, false)]), 0.75);
        close(roc_auc(&[(0.1, true), (0.9, false)]), 0.0);
        close(roc_auc(&[(0.1, true)]), 0.5);
    }

    #[test]
    fn threshold_metrics_match_hand_counts() {
        let s = [
            (0.9, true),
            (0.8, false),
            (0.6, true),
            (0.2, false),
            (0.1, true),
        ];
        // At 0.75: tp=1 fp=1 tn=1 fn=2 → acc 2/5, F1 = 2/(2+1+2) = 0.4.
        let (acc, f1) = accuracy_and_f1(&s, 0.75);
        close(acc, 0.4);
        close(f1, 0.4);
        // Recall 1/3 (0.9 of 0.9, 0.6, 0.1), specificity 1/2 (0.2 of 0.8, 0.2).
        let (recall, specificity) = recall_and_specificity(&s, 0.75);
        close(recall, 1.0 / 3.0);
        close(specificity, 0.5);
        assert_eq!(recall_and_specificity(&[(0.9, true)], 0.75), (1.0, 0.0));
        // At 0.1 everything is positive: tp=3 fp=2 → F1 = 6/8; the best threshold.
        let (best, t) = best_f1(&s);
        close(best, 0.75);
        close(t, 0.1);
    }

    #[test]
    fn brier_and_ece_match_hand_computation() {
        let s = [(1.0, true), (0.0, false), (0.25, true), (0.25, false)];
        close(brier(&s), (0.0 + 0.0 + 0.5625 + 0.0625) / 4.0);
        // Bins: [0.0] → |0−0|; [0.25 ×2] → |0.25−0.5| weighted 2/4; [1.0] → |1−1|.
        close(ece(&s), 0.125);
        // A constant 0.5 on a balanced set is perfectly calibrated and has AUC 0.5.
        let c = [(0.5, true), (0.5, false)];
        let m = metrics(&c, 0.75).unwrap();
        close(m.ece, 0.0);
        close(m.auc, 0.5);
        close(m.brier, 0.25);
        assert!(metrics(&[], 0.75).is_none());
    }

    #[test]
    fn splits_come_from_the_id_and_keep_file_order() {
        assert_eq!(split_of("tiage-test-001-u03"), "test");
        assert_eq!(split_of("tiage-train-120-u10"), "train");
        assert_eq!(split_of("research-pivot-03"), "all");
        let text = r#"{"id":"x-dev-1","earlier_discussion":"a","latest_turn":"b","label":true}

{"id":"x-test-1","earlier_discussion":"a","latest_turn":"b","label":false,"source":"s"}
{"id":"x-dev-2","earlier_discussion":"a","latest_turn":"b","label":false}"#;
        let cases = parse_cases(text, "mem.jsonl").unwrap();
        let groups = by_split(&cases);
        let names: Vec<(&str, usize)> = groups.iter().map(|(s, c)| (s.as_str(), c.len())).collect();
        assert_eq!(names, [("dev", 2), ("test", 1)]);
    }

    #[test]
    fn a_case_reads_its_turns_from_the_markdown() {
        let s = state_from_markdown(
            "**User**: a?\n**Assistant**: b\n\n**User**: c\n**Assistant**: d",
            "**User**: e\n**Assistant**: f",
        );
        let turns: Vec<(usize, &str, &str)> = s
            .turns
            .iter()
            .map(|t| (t.age, t.user.as_str(), t.assistant.as_str()))
            .collect();
        assert_eq!(turns, [(2, "a?", "b"), (1, "c", "d"), (0, "e", "f")]);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let text = "{\"id\":\"a\",\"earlier_discussion\":\"\",\"latest_turn\":\"\",\"label\":true}\n{\"id\":\"b\",\"label\":\"yes\"}";
        let e = parse_cases(text, "cases.jsonl").unwrap_err().to_string();
        assert!(e.starts_with("cases.jsonl:2:"), "{e}");
        assert!(
            parse_cases("\n\n", "empty.jsonl")
                .unwrap_err()
                .to_string()
                .contains("empty.jsonl")
        );
        let e = load_cases(Path::new("/nonexistent/cases.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/cases.jsonl"), "{e}");
    }
}
