//! `compaction tune`: τ chosen from recorded shadow decisions and labels — the τ with the
//! best F1, the lowest τ reaching a target precision — and a reliability diagram.

use std::path::PathBuf;

use super::args::SessionArgs;
use super::output::emit;
use crate::error::{Cause, CliError};
use crate::{shadow, wiring};

#[derive(Debug, clap::Args)]
pub(super) struct TuneArgs {
    #[command(flatten)]
    target: SessionArgs,
    /// The native session database holding the decisions.
    #[arg(long, value_name = "PATH")]
    db: PathBuf,
    /// Labels: a labelled research session (`.json`) or a CSV of `turn,label` lines.
    #[arg(long, value_name = "FILE")]
    labels: PathBuf,
    /// The precision the second τ must reach.
    #[arg(long, default_value_t = 0.9)]
    precision: f64,
    /// Write the reliability diagram to this PNG.
    #[arg(long, value_name = "PNG")]
    png: Option<PathBuf>,
}

/// Runs `compaction tune`.
pub(super) fn run(args: &TuneArgs) -> Result<(), CliError> {
    let precision = args.precision;
    if !(0.0..=1.0).contains(&precision) {
        return Err(CliError::Input(Cause::new(format!(
            "--precision must be a number in [0, 1], got {precision}"
        ))));
    }
    let decisions = super::decisions::recorded(&args.target, &args.db)?;
    let labels = shadow::read_labels(&args.labels)?;
    let tuning = shadow::tune(&decisions, &labels, precision);
    let mut out = std::io::stdout().lock();
    emit(&mut out, shadow::report(&tuning).trim_end())?;
    if let Some(png) = &args.png {
        shadow::write_reliability_png(&tuning, png)?;
        emit(
            &mut out,
            &format!("reliability diagram: {}", wiring::shown(png)),
        )?;
    }
    Ok(())
}
