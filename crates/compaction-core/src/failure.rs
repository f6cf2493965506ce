//! Why a call failed, as a kind a service can count: the engine's fail-open outcomes carry a
//! [`Failure`] (kind, a person's message, the source error), never a bare string.
//!
//! Adapters say what kind of failure they hit by returning [`classified`] errors through the
//! ports; an error that says nothing is [`FailureKind::Other`]. The engine adds the kinds it
//! decides itself (a missed deadline, an invalid probability, a stale session).

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::recall::scan::ExpandError;
use crate::session::{Revision, SessionKey};
use crate::time::Timestamp;

/// What kind of failure: stable, matchable and countable (`kind.label()` for metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The call did not answer within its deadline (the engine's or the adapter's own).
    Timeout,
    /// The remote answered with a non-success HTTP status (429, 500, …).
    HttpStatus(u16),
    /// The connection failed (refused, reset, DNS, TLS) before an answer arrived.
    Transport,
    /// The answer arrived but could not be read (not JSON, missing fields, truncated).
    InvalidReply,
    /// The decision model's probability was not a number in [0, 1].
    InvalidProbability,
    /// The model refused to answer.
    Refused,
    /// The summarizer's text failed a check the engine or the summarizer applies (empty,
    /// longer than what it replaces, a dropped fact): nothing was written.
    RejectedSummary,
    /// The session changed between the gate and the read: nothing to ask about.
    NothingToShow,
    /// Another writer moved the session on since it was read.
    Stale,
    /// The session is not in the store.
    NotFound,
    /// A session with this key already exists.
    AlreadyExists,
    /// The store is busy or locked by another writer.
    StoreLocked,
    /// The store's data is damaged or not what this code understands.
    StoreCorrupt,
    /// An event's timestamp does not increase over the session's latest one.
    NonIncreasingTimestamp,
    /// Anything else.
    Other,
}

impl FailureKind {
    /// A stable snake_case label (`timeout`, `http_status`, `stale`, …).
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::HttpStatus(_) => "http_status",
            FailureKind::Transport => "transport",
            FailureKind::InvalidReply => "invalid_reply",
            FailureKind::InvalidProbability => "invalid_probability",
            FailureKind::Refused => "refused",
            FailureKind::RejectedSummary => "rejected_summary",
            FailureKind::NothingToShow => "nothing_to_show",
            FailureKind::Stale => "stale",
            FailureKind::NotFound => "not_found",
            FailureKind::AlreadyExists => "already_exists",
            FailureKind::StoreLocked => "store_locked",
            FailureKind::StoreCorrupt => "store_corrupt",
            FailureKind::NonIncreasingTimestamp => "non_increasing_timestamp",
            FailureKind::Other => "other",
        }
    }

    /// The kind a [`FailureKind::label`] names (`http_status` needs its status: `None`).
    pub fn from_label(label: &str) -> Option<Self> {
        [
            FailureKind::Timeout,
            FailureKind::Transport,
            FailureKind::InvalidReply,
            FailureKind::InvalidProbability,
            FailureKind::Refused,
            FailureKind::RejectedSummary,
            FailureKind::NothingToShow,
            FailureKind::Stale,
            FailureKind::NotFound,
            FailureKind::AlreadyExists,
            FailureKind::StoreLocked,
            FailureKind::StoreCorrupt,
            FailureKind::NonIncreasingTimestamp,
            FailureKind::Other,
        ]
        .into_iter()
        .find(|k| k.label() == label)
    }

    /// The HTTP status, for [`FailureKind::HttpStatus`].
    pub fn http_status(self) -> Option<u16> {
        match self {
            FailureKind::HttpStatus(status) => Some(status),
            _ => None,
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureKind::HttpStatus(status) => write!(f, "http_status {status}"),
            other => f.write_str(other.label()),
        }
    }
}

/// A failure the engine reports in its outcome: the kind, the message a person reads and,
/// when there was one, the error it came from (`std::error::Error::source`).
///
/// Equality compares kind and message (two failures with the same words are the same to a
/// reader); the source is kept for logging and downcasting.
#[derive(Clone)]
pub struct Failure {
    kind: FailureKind,
    message: String,
    source: Option<Arc<dyn StdError + Send + Sync + 'static>>,
}

impl Failure {
    /// A failure of `kind` with a message and no source.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A failure from an adapter's error: the kind it was [`classified`] with (or
    /// [`FailureKind::Other`]), `context: error` as the message, the error as the source.
    pub fn from_adapter(context: &str, error: AdapterError) -> Self {
        let kind = kind_of(error.as_ref());
        // An adapter's words must never carry a secret; scrub anyway before anything records
        // them (outcomes are printed, stored by hosts and exported).
        let message = crate::scrub::scrub(&format!("{context}: {error}")).into_owned();
        Failure {
            kind,
            message,
            source: Some(Arc::from(error)),
        }
    }

    /// A failure from the store.
    pub fn from_store(error: StoreError) -> Self {
        let kind = error.kind();
        Failure {
            kind,
            message: error.to_string(),
            source: Some(Arc::new(error)),
        }
    }

    /// What kind of failure.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// What a person reads.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failure")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Failure {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl StdError for Failure {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

impl Serialize for Failure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let status = self.kind.http_status();
        let mut s = serializer.serialize_struct("Failure", 2 + usize::from(status.is_some()))?;
        s.serialize_field("kind", self.kind.label())?;
        if let Some(status) = status {
            s.serialize_field("status", &status)?;
        }
        s.serialize_field("message", &self.message)?;
        s.end()
    }
}

/// An adapter error that says what kind of failure it is. Build one with [`classified`].
#[derive(Debug)]
pub struct ClassifiedError {
    kind: FailureKind,
    source: AdapterError,
}

impl ClassifiedError {
    /// What kind of failure.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }
}

impl fmt::Display for ClassifiedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The words are the source's: the kind is for machines.
        fmt::Display::fmt(&self.source, f)
    }
}

impl StdError for ClassifiedError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Boxes `error` as an [`AdapterError`] that tells the engine its kind.
///
/// ```
/// use compaction_core::{FailureKind, classified, failure_kind};
///
/// let error = classified(FailureKind::HttpStatus(429), std::io::Error::other("rate limited"));
/// assert_eq!(failure_kind(error.as_ref()), FailureKind::HttpStatus(429));
/// assert_eq!(error.to_string(), "rate limited");
/// ```
pub fn classified(
    kind: FailureKind,
    error: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
) -> AdapterError {
    Box::new(ClassifiedError {
        kind,
        source: error.into(),
    })
}

/// The adapter's own error inside a [`classified`] one (or `error` itself when it was not
/// classified), for callers that downcast to the adapter's error type.
///
/// ```
/// use compaction_core::{FailureKind, classified, unclassified};
///
/// let error = classified(FailureKind::Timeout, std::io::Error::other("slow"));
/// assert!(unclassified(error).downcast::<std::io::Error>().is_ok());
/// ```
pub fn unclassified(error: AdapterError) -> AdapterError {
    match error.downcast::<ClassifiedError>() {
        Ok(classified) => classified.source,
        Err(other) => other,
    }
}

/// The kind an error was classified with: the first [`ClassifiedError`] or [`Failure`] in its
/// source chain, else [`FailureKind::Other`].
pub fn failure_kind(error: &(dyn StdError + 'static)) -> FailureKind {
    kind_of(error)
}

fn kind_of(error: &(dyn StdError + 'static)) -> FailureKind {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(c) = e.downcast_ref::<ClassifiedError>() {
            return c.kind;
        }
        if let Some(f) = e.downcast_ref::<Failure>() {
            return f.kind;
        }
        if let Some(s) = e.downcast_ref::<StoreError>() {
            return s.kind();
        }
        current = e.source();
    }
    FailureKind::Other
}

/// An adapter's error, boxed. Its `Display` must never contain a secret.
pub type AdapterError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer moved the session on since it was read.
    #[error("session {key} is stale: expected revision {expected}, found {actual}")]
    Stale {
        /// The session.
        key: SessionKey,
        /// The revision the writer read.
        expected: Revision,
        /// The revision now stored.
        actual: Revision,
    },
    /// No such session.
    #[error("session {0} not found")]
    NotFound(SessionKey),
    /// A session with this key already exists.
    #[error("session {0} already exists")]
    AlreadyExists(SessionKey),
    /// The event's timestamp does not increase over the session's latest in-view event
    /// (see [`crate::Clock`]): it is refused, since coverage by timestamp could hide it.
    #[error(
        "session {key}: event {event_id} has timestamp {offered}, not after the latest event's \
         {latest}; timestamps of a session's events must strictly increase"
    )]
    NonIncreasingTimestamp {
        /// The session.
        key: SessionKey,
        /// The refused event.
        event_id: String,
        /// The latest in-view event's timestamp.
        latest: Timestamp,
        /// The refused event's timestamp.
        offered: Timestamp,
    },
    /// An expansion named a compaction or turns the session does not have.
    #[error("session {key}: {error}")]
    Expand {
        /// The session.
        key: SessionKey,
        /// What was missing.
        #[source]
        error: ExpandError,
    },
    /// The backend failed. Classify it with [`crate::classified`] (locked, corrupt, …).
    #[error(transparent)]
    Backend(AdapterError),
}

impl StoreError {
    /// What kind of failure, for counting.
    pub fn kind(&self) -> FailureKind {
        match self {
            StoreError::Stale { .. } => FailureKind::Stale,
            StoreError::NotFound(_) => FailureKind::NotFound,
            StoreError::AlreadyExists(_) => FailureKind::AlreadyExists,
            StoreError::NonIncreasingTimestamp { .. } => FailureKind::NonIncreasingTimestamp,
            StoreError::Expand { .. } => FailureKind::NotFound,
            StoreError::Backend(e) => failure_kind(e.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_classified_error_keeps_its_kind_through_wrapping() {
        let inner = classified(FailureKind::Timeout, "no answer in 10 s");
        let failure = Failure::from_adapter("decision model failed", inner);
        assert_eq!(failure.kind(), FailureKind::Timeout);
        assert_eq!(
            failure.message(),
            "decision model failed: no answer in 10 s"
        );
        assert!(StdError::source(&failure).is_some());
    }

    #[test]
    fn an_unclassified_error_is_other() {
        let failure = Failure::from_adapter("x", "plain".into());
        assert_eq!(failure.kind(), FailureKind::Other);
    }

    #[test]
    fn serializes_kind_status_and_message() {
        let f = Failure::new(FailureKind::HttpStatus(503), "down");
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"kind":"http_status","status":503,"message":"down"}"#
        );
    }
}
