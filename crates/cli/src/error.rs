//! The binary's errors and their exit codes.

/// Exit codes (documented in the README):
/// 0 success, 1 unexpected failure, 2 usage error (clap), 3 bad input (transcript or config),
/// 4 database error (busy, corrupt, unknown session).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// A transcript could not be read.
    #[error(transparent)]
    Transcript(#[from] crate::transcript::TranscriptError),
    /// The config file or a setting is invalid.
    #[error("configuration: {0}")]
    Config(String),
    /// The session database failed.
    #[error("database: {0}")]
    Database(String),
    /// An input file other than a transcript (labels, an output path) is unusable.
    #[error("input: {0}")]
    Input(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Other(_) => 1,
            CliError::Transcript(_) | CliError::Config(_) | CliError::Input(_) => 3,
            CliError::Database(_) => 4,
        }
    }
}
