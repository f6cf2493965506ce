//! The crate's error.

/// What can go wrong configuring telemetry. Messages name the variable or setting and the
/// expected form; they never contain a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An environment variable holds a value of the wrong form.
    #[error("environment variable {var}={value:?} is invalid: expected {expected}")]
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// What it held.
        value: String,
        /// The accepted form.
        expected: &'static str,
    },
    /// A setting holds a value of the wrong form.
    #[error("{setting} {value:?} is invalid: expected {expected}")]
    InvalidSetting {
        /// The setting.
        setting: &'static str,
        /// What it held.
        value: String,
        /// The accepted form.
        expected: &'static str,
    },
    /// The endpoint is not an `http://` or `https://` URL.
    #[error(
        "OTLP endpoint {endpoint:?} (from {source_name}) is invalid: expected an http:// or https:// URL such as http://localhost:6006/v1/traces"
    )]
    InvalidEndpoint {
        /// The endpoint.
        endpoint: String,
        /// Where it came from: the argument or an environment variable.
        source_name: &'static str,
    },
    /// The OTLP exporter could not be built.
    #[cfg(feature = "otlp")]
    #[error("cannot build the OTLP/HTTP exporter for {endpoint}: {source}")]
    Exporter {
        /// The endpoint.
        endpoint: String,
        /// The exporter's error.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// A global tracing subscriber is already installed.
    #[error("cannot install the tracing subscriber: {0}")]
    Subscriber(String),
}
