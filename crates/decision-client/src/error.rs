//! The crate's error: what a decision adapter can fail with. Adapters box it as
//! compaction-core's `AdapterError`, classified by kind; callers can downcast
//! `compaction_core::unclassified(error)` to match on the variant.

use compaction_core::{AdapterError, FailureKind, classified};

use crate::http::HttpError;

/// A decision probe failed. No message ever contains an API key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// The HTTP exchange failed: timeout, 401/403, 429, another status, bad JSON or transport.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The response was JSON but held no probability where one was expected.
    #[error("{url}: the response has no probability ({detail})")]
    MissingProbability {
        /// The endpoint.
        url: String,
        /// Where the probability was looked for.
        detail: String,
    },
    /// The probability was not a number (for example the string `"NaN"`).
    #[error("{url}: the probability is not a number: {found}")]
    NotANumber {
        /// The endpoint.
        url: String,
        /// The value found, as JSON.
        found: String,
    },
    /// The probability was a number outside [0, 1].
    #[error("{url}: the probability {value} is outside [0, 1]")]
    OutOfRange {
        /// The endpoint.
        url: String,
        /// The value found.
        value: f64,
    },
    /// Neither `yes` nor `no` was among the judge's first-token alternatives.
    #[error("{url}: neither \"yes\" nor \"no\" is among the first token's alternatives {tokens:?}")]
    NoYesNo {
        /// The endpoint.
        url: String,
        /// The alternatives the judge returned.
        tokens: Vec<String>,
    },
    /// The model declined to answer the question (an OpenAI Decisions `refusal` answer): a
    /// failed probe.
    #[error("{url}: the model refused to answer `{question}`")]
    Refused {
        /// The endpoint.
        url: String,
        /// The question it refused.
        question: String,
    },
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {0}")]
    Client(String),
}

impl DecisionError {
    /// What kind of failure this is, for the engine's outcome.
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            DecisionError::Http(e) => e.failure_kind(),
            DecisionError::MissingProbability { .. } | DecisionError::NoYesNo { .. } => {
                FailureKind::InvalidReply
            }
            DecisionError::NotANumber { .. } | DecisionError::OutOfRange { .. } => {
                FailureKind::InvalidProbability
            }
            DecisionError::Refused { .. } => FailureKind::Refused,
            DecisionError::Client(_) => FailureKind::Other,
        }
    }

    /// Boxes the error for the port, classified with [`DecisionError::failure_kind`].
    pub fn into_adapter_error(self) -> AdapterError {
        classified(self.failure_kind(), self)
    }

    /// The HTTP error inside, when the exchange itself failed.
    pub fn http(&self) -> Option<&HttpError> {
        match self {
            DecisionError::Http(e) => Some(e),
            _ => None,
        }
    }
}

/// Checks a probability a host returned: a JSON number in [0, 1].
pub(crate) fn checked_probability(
    url: &str,
    value: &serde_json::Value,
) -> Result<f64, DecisionError> {
    match value.as_f64() {
        Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
        Some(p) if p.is_nan() => Err(DecisionError::NotANumber {
            url: url.to_owned(),
            found: value.to_string(),
        }),
        Some(p) => Err(DecisionError::OutOfRange {
            url: url.to_owned(),
            value: p,
        }),
        None => Err(DecisionError::NotANumber {
            url: url.to_owned(),
            found: value.to_string(),
        }),
    }
}
