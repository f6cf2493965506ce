//! Why a consolidation produced no summary. Messages name the endpoint and the model, never
//! the API key.

use decision_client::http::HttpError;

/// A summarizer failed; the engine writes nothing (fail-open).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizerError {
    /// The HTTP exchange failed (timeout, 401/403, 429, other status, invalid JSON, transport).
    #[error("summarizer request failed: {0}")]
    Http(#[from] HttpError),
    /// The host answered 200 with an `error` object instead of a completion.
    #[error("{url}: the host returned an error instead of a summary: {message}")]
    Upstream {
        /// The endpoint.
        url: String,
        /// The host's message (at most 300 characters).
        message: String,
    },
    /// The body was JSON but not a chat completion.
    #[error("{url}: malformed chat completion: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was missing or mistyped.
        reason: String,
    },
    /// The summary was empty or whitespace.
    #[error("{source_name} returned an empty summary")]
    EmptySummary {
        /// The endpoint or summarizer that answered.
        source_name: String,
    },
    /// The reply was cut by the output-token limit (`finish_reason: "length"`).
    #[error(
        "{url}: the summary was truncated at the output-token limit (finish_reason \"length\"); \
         raise summarizer_max_output_tokens ({max_tokens})"
    )]
    Truncated {
        /// The endpoint.
        url: String,
        /// The configured limit.
        max_tokens: u32,
    },
    /// The model refused (`message.refusal` set, or `finish_reason: "content_filter"`).
    #[error("{url}: the model refused to summarize: {reason}")]
    Refused {
        /// The endpoint.
        url: String,
        /// The refusal text or the finish reason.
        reason: String,
    },
    /// The summary is longer than the text it replaces (the previous summary plus the new
    /// turns): committing it would grow the context. Nothing is written.
    #[error(
        "{source_name}: the summary ({summary_tokens} tokens) is longer than the text it \
         replaces ({replaced_tokens} tokens); nothing is committed"
    )]
    Oversized {
        /// The endpoint or summarizer that answered.
        source_name: String,
        /// Estimated tokens of the summary.
        summary_tokens: usize,
        /// Estimated tokens of the previous summary and the new turns.
        replaced_tokens: usize,
    },
    /// The summary keeps fewer than half of the previous summary's figures and citations: it
    /// dropped the earlier ledger. Nothing is written.
    #[error(
        "{source_name}: the summary keeps {kept} of the previous summary's {total} figures \
         and citations; a summary that drops the earlier ledger is not committed"
    )]
    LedgerDropped {
        /// The endpoint or summarizer that answered.
        source_name: String,
        /// Figures and citations of the previous summary the new one keeps.
        kept: usize,
        /// Figures and citations of the previous summary.
        total: usize,
    },
    /// The summary states a claim a later turn corrected as if it were still valid (issue
    /// 30): it names the claim's subject and a retracted value, without the correction.
    /// Nothing is written.
    #[error(
        "{source_name}: the summary restates a corrected claim as valid ({line:?}; it was \
         corrected to {now:?}); nothing is committed"
    )]
    RestatesSuperseded {
        /// The endpoint or summarizer that answered.
        source_name: String,
        /// The summary's line.
        line: String,
        /// What the claim was corrected to.
        now: String,
    },
}

impl SummarizerError {
    /// What kind of failure this is, for the engine's outcome.
    pub fn failure_kind(&self) -> compaction_core::FailureKind {
        use compaction_core::FailureKind;
        match self {
            SummarizerError::Http(e) => e.failure_kind(),
            SummarizerError::Upstream { .. }
            | SummarizerError::Malformed { .. }
            | SummarizerError::Truncated { .. } => FailureKind::InvalidReply,
            SummarizerError::EmptySummary { .. }
            | SummarizerError::Oversized { .. }
            | SummarizerError::LedgerDropped { .. }
            | SummarizerError::RestatesSuperseded { .. } => FailureKind::RejectedSummary,
            SummarizerError::Refused { .. } => FailureKind::Refused,
        }
    }

    /// Boxes the error for the port, classified with [`SummarizerError::failure_kind`].
    pub fn into_adapter_error(self) -> compaction_core::AdapterError {
        compaction_core::classified(self.failure_kind(), self)
    }
}
