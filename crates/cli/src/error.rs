//! The binary's errors and their exit codes.
//!
//! Each error is the one line a person reads (`error: …`, the messages the tests' snapshots
//! hold) and, when a failure below caused it, that failure as its
//! [`source`](std::error::Error::source): a store, config or I/O error keeps its type and its
//! own chain, so a caller (or a test) can tell a locked database from a corrupt one without
//! reading the text. The line already includes what the source says; the binary prints the
//! line only.

use std::error::Error;
use std::fmt;

/// Exit codes (documented in the README):
/// 0 success, 1 unexpected failure, 2 usage error (clap), 3 bad input (transcript or config),
/// 4 database error (busy, corrupt, unknown session).
#[derive(Debug)]
pub(crate) enum CliError {
    /// A transcript could not be read.
    Transcript(crate::transcript::TranscriptError),
    /// The config file or a setting is invalid.
    Config(Cause),
    /// The session database failed.
    Database(Cause),
    /// An input file other than a transcript (labels, an output path) is unusable.
    Input(Cause),
    /// Anything else.
    Other(Cause),
}

/// What went wrong: the message, and the error that caused it when there is one.
#[derive(Debug)]
pub(crate) struct Cause {
    message: String,
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl Cause {
    /// A message of the command's own (a flag out of range, a file that is not there).
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Cause {
            message: message.into(),
            source: None,
        }
    }

    /// `error`, whose message is the line shown.
    pub(crate) fn of(error: impl Error + Send + Sync + 'static) -> Self {
        Cause {
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }

    /// `message` (which says what `error` says, in context) caused by `error`.
    pub(crate) fn with(
        message: impl Into<String>,
        error: impl Error + Send + Sync + 'static,
    ) -> Self {
        Cause {
            message: message.into(),
            source: Some(Box::new(error)),
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl CliError {
    /// A configuration error that is `error`.
    pub(crate) fn config(error: impl Error + Send + Sync + 'static) -> Self {
        CliError::Config(Cause::of(error))
    }

    /// A database error that is `error`.
    pub(crate) fn database(error: impl Error + Send + Sync + 'static) -> Self {
        CliError::Database(Cause::of(error))
    }

    /// An input error that is `error`.
    pub(crate) fn input(error: impl Error + Send + Sync + 'static) -> Self {
        CliError::Input(Cause::of(error))
    }

    /// An unexpected failure that is `error`.
    pub(crate) fn other(error: impl Error + Send + Sync + 'static) -> Self {
        CliError::Other(Cause::of(error))
    }

    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Other(_) => 1,
            CliError::Transcript(_) | CliError::Config(_) | CliError::Input(_) => 3,
            CliError::Database(_) => 4,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Transcript(e) => e.fmt(f),
            CliError::Config(c) => write!(f, "configuration: {c}"),
            CliError::Database(c) => write!(f, "database: {c}"),
            CliError::Input(c) => write!(f, "input: {c}"),
            CliError::Other(c) => c.fmt(f),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            // The transcript error is shown as itself: its source is the next link.
            CliError::Transcript(e) => e.source(),
            CliError::Config(c)
            | CliError::Database(c)
            | CliError::Input(c)
            | CliError::Other(c) => c.source.as_deref().map(|e| e as &(dyn Error + 'static)),
        }
    }
}

impl From<crate::transcript::TranscriptError> for CliError {
    fn from(error: crate::transcript::TranscriptError) -> Self {
        CliError::Transcript(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_error_keeps_the_store_error_it_shows() {
        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full");
        let e = CliError::database(io);
        assert_eq!(e.to_string(), "database: disk full");
        assert_eq!(e.exit_code(), 4);
        let source = e.source().expect("the cause is kept");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("as its own type");
        assert_eq!(io.kind(), std::io::ErrorKind::StorageFull);
    }

    #[test]
    fn a_message_in_context_keeps_its_cause_and_a_check_of_our_own_has_none() {
        let io = std::io::Error::other("broken pipe");
        let e = CliError::Other(Cause::with(format!("cannot write output: {io}"), io));
        assert_eq!(e.to_string(), "cannot write output: broken pipe");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
        let e = CliError::Input(Cause::new("--precision must be a number in [0, 1], got 2"));
        assert_eq!(
            e.to_string(),
            "input: --precision must be a number in [0, 1], got 2"
        );
        assert!(e.source().is_none());
        assert_eq!(e.exit_code(), 3);
    }
}
