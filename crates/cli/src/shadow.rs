//! Shadow mode's two commands: `compaction decisions` lists the recorded decisions of a
//! session, `compaction tune` joins them with labels and chooses τ (the metrics are
//! `decision_client::tuning`'s), writing a reliability diagram as a PNG. Recorded p is used as
//! recorded, never re-queried.

use std::collections::BTreeMap;
use std::path::Path;

use compaction_core::DecisionRecord;
use decision_client::tuning::{
    Operating, ReliabilityBin, best_f1_threshold, reliability, threshold_for_precision,
};
use serde_json::Value;

use crate::error::{Cause, CliError};
use crate::render::for_terminal;

/// The table `compaction decisions` prints.
pub(crate) fn decisions_table(decisions: &[DecisionRecord]) -> String {
    let mut out = String::from(
        "turn  revision  completed  tokens     gate      p     verdict   model (served)            state\n",
    );
    for d in decisions {
        let p = d
            .probability
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.2}"));
        let verdict = d
            .verdict
            .clone()
            .or_else(|| d.failure.as_ref().map(|f| format!("failed: {}", f.kind())))
            .unwrap_or_else(|| "-".to_owned());
        let model = match &d.served_model {
            Some(served) if served != &d.model => format!("{} ({served})", d.model),
            _ => d.model.clone(),
        };
        out.push_str(&format!(
            "{:>4}  {:>8}  {:>9}  {:>9}  {:<8}  {:>4}  {:<8}  {:<24}  {}\n",
            d.turn,
            d.revision.0,
            d.completed_turns_since_compaction,
            d.coordinator_prompt_tokens
                .map_or_else(|| "-".to_owned(), |t| t.to_string()),
            if d.backstop { "backstop" } else { "probe" },
            p,
            for_terminal(&verdict),
            for_terminal(&model),
            d.state_hash,
        ));
    }
    out
}

/// Labels by turn number, from a labelled research session (`*.json`: `turns[].n` and
/// `turns[].expect.pivot`) or a CSV of `turn,label` lines (`true`/`false`/`1`/`0`; a header
/// line and blank lines are skipped). Errors name the file, the line and the expected form.
pub(crate) fn read_labels(path: &Path) -> Result<BTreeMap<usize, bool>, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Input(Cause::with(
            format!("{shown}: cannot read the labels: {e}"),
            e,
        ))
    })?;
    if path.extension().is_some_and(|e| e == "json") {
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| CliError::Input(Cause::with(format!("{shown}: not JSON: {e}"), e)))?;
        let turns = doc["turns"].as_array().ok_or_else(|| {
            CliError::Input(Cause::new(format!(
                "{shown}: expected a labelled session: an object with a `turns` array"
            )))
        })?;
        let mut labels = BTreeMap::new();
        for (i, turn) in turns.iter().enumerate() {
            let n = turn["n"].as_u64().ok_or_else(|| {
                CliError::Input(Cause::new(format!(
                    "{shown}: turns[{i}].n must be a turn number"
                )))
            })?;
            let pivot = turn["expect"]["pivot"].as_bool().ok_or_else(|| {
                CliError::Input(Cause::new(format!(
                    "{shown}: turns[{i}].expect.pivot must be true or false"
                )))
            })?;
            labels.insert(usize::try_from(n).unwrap_or(usize::MAX), pivot);
        }
        return Ok(labels);
    }
    let mut labels = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || (i == 0 && line.to_ascii_lowercase().starts_with("turn")) {
            continue;
        }
        let bad = || {
            CliError::Input(Cause::new(format!(
                "{shown}:{}: expected `turn,label` (a turn number and true/false/1/0), got {:?}",
                i + 1,
                for_terminal(line)
            )))
        };
        let (turn, label) = line.split_once(',').ok_or_else(bad)?;
        let turn: usize = turn.trim().parse().map_err(|_| bad())?;
        let label = match label.trim() {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(bad()),
        };
        labels.insert(turn, label);
    }
    Ok(labels)
}

/// What `compaction tune` found.
#[derive(Debug)]
pub(crate) struct Tuning {
    /// (p, label) of every recorded decision with a p and a label.
    pub(crate) scored: Vec<(f64, bool)>,
    /// Decisions left out: no p (a failed probe) or no label for their turn.
    pub(crate) skipped: usize,
    /// τ with the greatest F1.
    pub(crate) best_f1: Option<Operating>,
    /// The lowest τ reaching the target precision.
    pub(crate) for_precision: Option<Operating>,
    /// The target precision.
    pub(crate) target_precision: f64,
    /// The reliability diagram's bins.
    pub(crate) bins: Vec<ReliabilityBin>,
}

/// Joins recorded decisions with labels by turn (the latest decision of a turn wins).
pub(crate) fn tune(
    decisions: &[DecisionRecord],
    labels: &BTreeMap<usize, bool>,
    target_precision: f64,
) -> Tuning {
    let mut by_turn: BTreeMap<usize, f64> = BTreeMap::new();
    let mut skipped = 0;
    for d in decisions {
        match (d.probability, labels.get(&d.turn)) {
            (Some(p), Some(_)) => {
                if by_turn.insert(d.turn, p).is_some() {
                    skipped += 1;
                }
            }
            _ => skipped += 1,
        }
    }
    let scored: Vec<(f64, bool)> = by_turn.iter().map(|(turn, p)| (*p, labels[turn])).collect();
    Tuning {
        best_f1: best_f1_threshold(&scored),
        for_precision: threshold_for_precision(&scored, target_precision),
        target_precision,
        bins: reliability(&scored, 10),
        scored,
        skipped,
    }
}

/// The lines `compaction tune` prints.
pub(crate) fn report(t: &Tuning) -> String {
    let positives = t.scored.iter().filter(|(_, y)| *y).count();
    let mut out = format!(
        "{} labelled decisions ({} pivots), {} left out (no p, no label, or an older decision of the same turn)\n",
        t.scored.len(),
        positives,
        t.skipped
    );
    let line = |what: &str, o: &Option<Operating>| match o {
        Some(o) => format!(
            "{what}: τ = {:.3} (precision {:.2}, recall {:.2}, F1 {:.2})\n",
            o.threshold, o.precision, o.recall, o.f1
        ),
        None => format!("{what}: none (no threshold reaches it on these decisions)\n"),
    };
    out.push_str(&line("best F1", &t.best_f1));
    out.push_str(&line(
        &format!("precision ≥ {:.2}", t.target_precision),
        &t.for_precision,
    ));
    out.push_str(&format!(
        "ECE (10 bins): {:.3}\n",
        decision_client::eval::ece(&t.scored)
    ));
    out
}

/// The diagram could not be drawn or written (plotters' errors are not `Send`: the message
/// is kept, not the error).
fn diagram_error(path: &Path, e: &dyn std::fmt::Display) -> CliError {
    CliError::Input(Cause::new(format!(
        "{}: cannot write the diagram: {e}",
        path.display()
    )))
}

/// Writes the reliability diagram: observed pivot rate against mean p per bin, with the
/// diagonal of perfect calibration and each bin's count.
pub(crate) fn write_reliability_png(t: &Tuning, path: &Path) -> Result<(), CliError> {
    use plotters::prelude::*;
    use plotters::style::{FontStyle, register_font};

    let failed = |e: &dyn std::fmt::Display| diagram_error(path, e);
    register_font(
        "sans-serif",
        FontStyle::Normal,
        include_bytes!("../assets/DejaVuSans.ttf"),
    )
    .map_err(|_| failed(&"the bundled font did not load"))?;
    let root = BitMapBackend::new(path, (640, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Reliability: {} decisions", t.scored.len()),
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .x_desc("mean predicted p")
        .y_desc("observed pivot rate")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| failed(&e))?;
    chart
        .draw_series(LineSeries::new([(0.0, 0.0), (1.0, 1.0)], &BLACK.mix(0.4)))
        .map_err(|e| failed(&e))?
        .label("perfect calibration")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.4)));
    let filled: Vec<&ReliabilityBin> = t.bins.iter().filter(|b| b.count > 0).collect();
    chart
        .draw_series(LineSeries::new(
            filled.iter().map(|b| (b.mean_probability, b.observed_rate)),
            &BLUE,
        ))
        .map_err(|e| failed(&e))?
        .label("recorded decisions")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(filled.iter().map(|b| {
            Circle::new(
                (b.mean_probability, b.observed_rate),
                3 + (b.count.min(40) / 4) as i32,
                BLUE.filled(),
            )
        }))
        .map_err(|e| failed(&e))?;
    chart
        .draw_series(filled.iter().map(|b| {
            Text::new(
                format!("n={}", b.count),
                (
                    b.mean_probability.min(0.9),
                    (b.observed_rate + 0.04).min(0.95),
                ),
                ("sans-serif", 13),
            )
        }))
        .map_err(|e| failed(&e))?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))?;
    Ok(())
}
