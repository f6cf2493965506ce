//! Standard output for the commands: lines for a person are shown with control characters
//! escaped ([`render::for_terminal`]), so session text cannot drive the terminal; JSON lines
//! are written exactly (serde_json already escapes what JSON must).

use std::io::Write;

use crate::error::{Cause, CliError};
use crate::render;

/// Standard output that may fail (a closed pipe, a full disk): the first failure is kept and
/// later lines are dropped, so that a replay still finishes its session and says so.
pub(super) struct Output<W: Write> {
    out: W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Output<W> {
    pub(super) fn new(out: W) -> Self {
        Output { out, failed: None }
    }

    /// Writes one line for a person ([`emit`]); never fails, see [`Output::into_failure`].
    pub(super) fn line(&mut self, line: &str) {
        self.raw(&render::for_terminal(line));
    }

    /// Writes one JSON line exactly.
    pub(super) fn json(&mut self, line: &str) {
        self.raw(line);
    }

    fn raw(&mut self, line: &str) {
        if self.failed.is_none()
            && let Err(e) = writeln!(self.out, "{line}").and_then(|()| self.out.flush())
        {
            self.failed = Some(e);
        }
    }

    /// The first write failure, if any.
    pub(super) fn into_failure(self) -> Option<std::io::Error> {
        self.failed
    }
}

/// Writes one line for a person: control characters and bidirectional-text controls in it are
/// shown escaped ([`render::for_terminal`]), so session text cannot drive the terminal.
pub(super) fn emit(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    emit_json(out, &render::for_terminal(line))
}

/// Writes one line exactly as given (JSON records: serde_json already escapes what JSON must).
pub(super) fn emit_json(out: &mut impl Write, line: &str) -> Result<(), CliError> {
    writeln!(out, "{line}")
        .map_err(|e| CliError::Other(Cause::with(format!("cannot write output: {e}"), e)))
}
