//! Setting up an OTLP/HTTP exporter: Phoenix's endpoint by default, the standard
//! `OTEL_EXPORTER_OTLP_*` variables honoured, a batch processor, and a flush on shutdown.
//!
//! Nothing here runs unless the caller asks for it: without [`init_otlp`] (or
//! [`OtlpSetup::init`]) no exporter exists and no span leaves the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter};
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::TelemetryConfig;
use crate::error::TelemetryError;
use crate::keys;
use crate::spans::OpenInferenceTelemetry;

/// Arize Phoenix's OTLP/HTTP traces endpoint when run locally with `phoenix serve`.
pub const PHOENIX_ENDPOINT: &str = "http://localhost:6006/v1/traces";
/// The standard traces-only endpoint variable; used as is.
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard base endpoint variable; `/v1/traces` is appended to it.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard service-name variable.
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";
/// Phoenix's project variable (as `phoenix.otel.register` reads it): the project the spans are
/// filed under, sent as the resource attribute `openinference.project.name`.
pub const PROJECT_NAME_ENV: &str = "PHOENIX_PROJECT_NAME";
/// The service name when [`SERVICE_NAME_ENV`] is unset.
pub const DEFAULT_SERVICE_NAME: &str = "adaptive-compaction";

/// The longest the guard's final flush and shutdown may take: a collector that never answers
/// delays the program's exit by at most this much (pending spans are then dropped).
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// The `tracing` target of the exporter's warnings: the first failed export and a shutdown
/// that ran out of time. A program shows them by enabling this target at `warn` (the
/// `compaction` binary does by default).
pub const WARNING_TARGET: &str = "telemetry::otlp";

/// The OTLP exporter, counting failed exports and warning (once) about the first one, so that
/// a wrong path (HTTP 404) or an unreachable collector does not go unnoticed.
#[derive(Debug)]
struct WarnOnce<E> {
    inner: E,
    endpoint: String,
    failures: Arc<AtomicU64>,
}

impl<E: SpanExporter> SpanExporter for WarnOnce<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(error) = &result
            && self.failures.fetch_add(1, Ordering::SeqCst) == 0
        {
            tracing::warn!(
                target: WARNING_TARGET,
                "spans could not be sent to {}: {error} (reported once; later failures are not)",
                shown_endpoint(&self.endpoint)
            );
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Where the endpoint came from.
const FROM_ARGUMENT: &str = "the endpoint argument";
const FROM_DEFAULT: &str = "the Phoenix default";

type Lookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Exports spans to `endpoint` (or the endpoint the environment names, or Phoenix's) over
/// OTLP/HTTP with a batch processor. Same as `OtlpSetup::new().endpoint(endpoint).init()`.
///
/// Keep the returned guard alive for the life of the program: dropping it flushes pending
/// spans and shuts the exporter down.
///
/// ```no_run
/// use std::sync::Arc;
/// use telemetry::{TelemetryConfig, init_otlp};
/// use tracing_subscriber::layer::SubscriberExt as _;
/// use tracing_subscriber::util::SubscriberInitExt as _;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Phoenix on localhost:6006 unless OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT says otherwise.
/// let guard = init_otlp(None)?;
/// // The caller's own spans (the turn) go to the same exporter, so ours nest under them.
/// tracing_subscriber::registry().with(guard.layer()).init();
/// let telemetry = Arc::new(guard.telemetry(TelemetryConfig::from_env()?));
/// // … EngineBuilder::telemetry(telemetry) …
/// # drop(telemetry);
/// drop(guard); // flushes
/// # Ok(())
/// # }
/// ```
pub fn init_otlp(endpoint: Option<&str>) -> Result<TelemetryGuard, TelemetryError> {
    OtlpSetup::new().endpoint(endpoint).init()
}

/// An endpoint as it may be shown (errors, `Debug`, logs): any `user:password@` part is
/// replaced by `***@`, since collectors are sometimes reached with credentials in the URL.
pub fn shown_endpoint(endpoint: &str) -> String {
    match url::Url::parse(endpoint) {
        Ok(mut parsed) if parsed.has_host() => {
            if !parsed.username().is_empty() || parsed.password().is_some() {
                // Neither fails on a URL with a host.
                let _ = parsed.set_password(None);
                let _ = parsed.set_username("***");
            }
            let shown = parsed.to_string();
            // The parser writes an empty path as `/`; show the endpoint as it was written.
            if parsed.path() == "/" && !endpoint.ends_with('/') && shown.ends_with('/') {
                shown.trim_end_matches('/').to_owned()
            } else {
                shown
            }
        }
        // Not a URL with a host: shown as written unless it may hold credentials.
        _ if endpoint.contains('@') => "<not a URL; not shown>".to_owned(),
        _ => endpoint.to_owned(),
    }
}

/// Whether `endpoint` is an absolute `http://` or `https://` URL with a host, read with the
/// `url` crate (the workspace's one URL parser).
fn is_http_url(endpoint: &str) -> bool {
    url::Url::parse(endpoint).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// The OTLP/HTTP exporter's setup, for callers who need more than [`init_otlp`].
pub struct OtlpSetup {
    endpoint: Option<String>,
    project_name: Option<String>,
    lookup: Lookup,
    install_subscriber: bool,
}

impl std::fmt::Debug for OtlpSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSetup")
            .field("endpoint", &self.endpoint.as_deref().map(shown_endpoint))
            .field("project_name", &self.project_name)
            .field("install_subscriber", &self.install_subscriber)
            .finish_non_exhaustive()
    }
}

impl Default for OtlpSetup {
    fn default() -> Self {
        Self::new()
    }
}

impl OtlpSetup {
    /// Reads the process environment; no explicit endpoint; no subscriber installed.
    pub fn new() -> Self {
        OtlpSetup {
            endpoint: None,
            project_name: None,
            lookup: Box::new(|var| std::env::var(var).ok()),
            install_subscriber: false,
        }
    }

    /// An explicit endpoint, used as is; it overrides the environment. `None` or blank
    /// leaves the choice to the environment and then to [`PHOENIX_ENDPOINT`].
    pub fn endpoint(mut self, endpoint: Option<&str>) -> Self {
        self.endpoint = endpoint
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned);
        self
    }

    /// The Phoenix project the spans land in (the resource attribute
    /// `openinference.project.name`); it overrides [`PROJECT_NAME_ENV`]. `None` or blank
    /// leaves the choice to the environment, then to Phoenix (its `default` project).
    pub fn project_name(mut self, project: Option<&str>) -> Self {
        self.project_name = project
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        self
    }

    /// The project the spans are filed under: the explicit one, else [`PROJECT_NAME_ENV`];
    /// `None` lets Phoenix use its `default` project.
    pub fn resolve_project_name(&self) -> Option<String> {
        self.project_name.clone().or_else(|| {
            (self.lookup)(PROJECT_NAME_ENV)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        })
    }

    /// Reads variables through `lookup` instead of the process environment.
    pub fn env_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.lookup = Box::new(lookup);
        self
    }

    /// Also installs a global `tracing` subscriber whose only layer sends `tracing` spans to
    /// the exporter (so the caller's turn span and ours share a trace). Leave it off when
    /// the program builds its own subscriber with [`TelemetryGuard::layer`].
    pub fn install_subscriber(mut self, install: bool) -> Self {
        self.install_subscriber = install;
        self
    }

    /// The traces endpoint, as the OTLP exporter specification resolves it: the explicit
    /// endpoint; else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is; else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` appended; else [`PHOENIX_ENDPOINT`].
    pub fn resolve_endpoint(&self) -> Result<String, TelemetryError> {
        let from_env = |var: &'static str| {
            (self.lookup)(var)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .map(|v| (v, var))
        };
        let (endpoint, source_name) = if let Some(e) = &self.endpoint {
            (e.clone(), FROM_ARGUMENT)
        } else if let Some(found) = from_env(TRACES_ENDPOINT_ENV) {
            found
        } else if let Some((base, var)) = from_env(ENDPOINT_ENV) {
            (format!("{}/v1/traces", base.trim_end_matches('/')), var)
        } else {
            (PHOENIX_ENDPOINT.to_owned(), FROM_DEFAULT)
        };
        if is_http_url(&endpoint) {
            Ok(endpoint)
        } else {
            Err(TelemetryError::InvalidEndpoint {
                endpoint: shown_endpoint(&endpoint),
                source_name,
            })
        }
    }

    /// Builds the exporter and the tracer provider (and the subscriber, when asked).
    pub fn init(self) -> Result<TelemetryGuard, TelemetryError> {
        let endpoint = self.resolve_endpoint()?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint.clone())
            .build()
            .map_err(|source| TelemetryError::Exporter {
                endpoint: shown_endpoint(&endpoint),
                source,
            })?;
        let service_name = (self.lookup)(SERVICE_NAME_ENV)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
        let mut resource = Resource::builder().with_service_name(service_name);
        if let Some(project) = self.resolve_project_name() {
            resource = resource.with_attribute(opentelemetry::KeyValue::new(
                keys::OPENINFERENCE_PROJECT_NAME,
                project,
            ));
        }
        let failures = Arc::new(AtomicU64::new(0));
        let exporter = WarnOnce {
            inner: exporter,
            endpoint: endpoint.clone(),
            failures: failures.clone(),
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let guard = TelemetryGuard {
            provider,
            endpoint,
            failures,
            shut_down: false,
        };
        if self.install_subscriber {
            tracing_subscriber::registry()
                .with(guard.layer())
                .try_init()
                .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
        }
        Ok(guard)
    }
}

/// Owns the exporter. Dropping it flushes pending spans and shuts the exporter down.
#[must_use = "dropping the guard shuts the exporter down at once"]
pub struct TelemetryGuard {
    provider: SdkTracerProvider,
    endpoint: String,
    failures: Arc<AtomicU64>,
    shut_down: bool,
}

impl std::fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("endpoint", &shown_endpoint(&self.endpoint))
            .field("shut_down", &self.shut_down)
            .finish_non_exhaustive()
    }
}

impl TelemetryGuard {
    /// The traces endpoint spans are sent to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A tracer on the exporter, under the `adaptive-compaction` instrumentation scope.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer(keys::INSTRUMENTATION_SCOPE)
    }

    /// The compaction spans' adapter, recording on this exporter.
    pub fn telemetry(&self, config: TelemetryConfig) -> OpenInferenceTelemetry {
        OpenInferenceTelemetry::new(self.tracer(), config)
    }

    /// A `tracing` layer that exports the program's own `tracing` spans on this exporter,
    /// so that the compaction spans nest under the turn's span. Add it to the program's
    /// subscriber (`tracing_subscriber::registry().with(guard.layer())`).
    ///
    /// It exports spans at INFO level and above only, and never events: log lines (which may
    /// quote an upstream's error text) and the HTTP stack's trace-level spans stay out of the
    /// collector; only this crate's scrubbed spans carry free text there.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S> + use<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        use tracing_subscriber::Layer as _;
        let spans_only = tracing_subscriber::filter::filter_fn(|meta| {
            meta.is_span() && *meta.level() <= tracing::Level::INFO
        });
        let layer: OpenTelemetryLayer<S, SdkTracer> = tracing_opentelemetry::layer()
            .with_tracer(self.tracer())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false);
        layer.with_filter(spans_only)
    }

    /// How many exports have failed so far (the first one was warned about).
    pub fn export_failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Flushes pending spans and shuts the exporter down within [`SHUTDOWN_TIMEOUT`],
    /// reporting a failure (dropping the guard does the same but can only log it).
    pub fn shutdown(mut self) -> Result<(), opentelemetry_sdk::error::OTelSdkError> {
        self.shut_down = true;
        self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if self.shut_down {
            return;
        }
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!(
                target: WARNING_TARGET,
                "the OTLP exporter for {} did not shut down cleanly within {SHUTDOWN_TIMEOUT:?} ({error}); pending spans may be lost",
                shown_endpoint(&self.endpoint)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(pairs: &'static [(&'static str, &'static str)]) -> OtlpSetup {
        OtlpSetup::new().env_lookup(move |var| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn credentials_in_an_endpoint_are_never_shown() {
        assert_eq!(
            shown_endpoint("https://user:TOPSECRET@collector.example:4318/v1/traces"),
            "https://***@collector.example:4318/v1/traces"
        );
        assert_eq!(shown_endpoint(PHOENIX_ENDPOINT), PHOENIX_ENDPOINT);
        assert_eq!(
            shown_endpoint("http://me@localhost:4318"),
            "http://***@localhost:4318"
        );
        assert_eq!(
            shown_endpoint("not a url, me@host"),
            "<not a URL; not shown>"
        );
        assert_eq!(shown_endpoint("localhost:4318"), "localhost:4318");
        let s = setup(&[]).endpoint(Some("ftp://user:TOPSECRET@host/v1/traces"));
        assert!(!format!("{s:?}").contains("TOPSECRET"));
        let err = s.resolve_endpoint().unwrap_err();
        assert!(!format!("{err} {err:?}").contains("TOPSECRET"), "{err}");
    }

    #[test]
    fn the_project_name_comes_from_the_setup_then_phoenix_s_variable() {
        assert_eq!(setup(&[]).resolve_project_name(), None);
        let s = setup(&[(PROJECT_NAME_ENV, " zocrates-research ")]);
        assert_eq!(
            s.resolve_project_name().as_deref(),
            Some("zocrates-research")
        );
        let s = s.project_name(Some("replays"));
        assert_eq!(s.resolve_project_name().as_deref(), Some("replays"));
        let s = setup(&[(PROJECT_NAME_ENV, "env")]).project_name(Some("  "));
        assert_eq!(s.resolve_project_name().as_deref(), Some("env"));
    }

    #[test]
    fn phoenix_is_the_default() {
        assert_eq!(setup(&[]).resolve_endpoint().unwrap(), PHOENIX_ENDPOINT);
    }

    #[test]
    fn the_traces_variable_is_used_as_is_and_beats_the_base_variable() {
        let s = setup(&[
            (TRACES_ENDPOINT_ENV, "http://collector:4318/custom"),
            (ENDPOINT_ENV, "http://other:4318"),
        ]);
        assert_eq!(
            s.resolve_endpoint().unwrap(),
            "http://collector:4318/custom"
        );
    }

    #[test]
    fn the_base_variable_gets_the_traces_path() {
        for base in ["http://localhost:6006", "http://localhost:6006/"] {
            let s = OtlpSetup::new()
                .env_lookup(move |var| (var == ENDPOINT_ENV).then(|| base.to_owned()));
            assert_eq!(s.resolve_endpoint().unwrap(), PHOENIX_ENDPOINT);
        }
    }

    #[test]
    fn the_argument_beats_the_environment_and_blank_means_unset() {
        let s = setup(&[(TRACES_ENDPOINT_ENV, "http://collector:4318/v1/traces")]);
        let s = s.endpoint(Some("https://phoenix.example/v1/traces"));
        assert_eq!(
            s.resolve_endpoint().unwrap(),
            "https://phoenix.example/v1/traces"
        );
        let s = setup(&[]).endpoint(Some("  "));
        assert_eq!(s.resolve_endpoint().unwrap(), PHOENIX_ENDPOINT);
    }

    #[test]
    fn a_malformed_endpoint_names_its_source_and_the_expected_form() {
        let error = setup(&[(ENDPOINT_ENV, "localhost:6006")])
            .resolve_endpoint()
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "OTLP endpoint \"localhost:6006/v1/traces\" (from OTEL_EXPORTER_OTLP_ENDPOINT) is invalid: \
             expected an http:// or https:// URL such as http://localhost:6006/v1/traces"
        );
        let error = setup(&[])
            .endpoint(Some("http://"))
            .resolve_endpoint()
            .unwrap_err()
            .to_string();
        assert!(error.contains("(from the endpoint argument)"), "{error}");
        // The hand-written check took any text after the scheme for a host.
        for bad in ["http://exa mple.com/v1/traces", "https://:4318/v1/traces"] {
            assert!(
                setup(&[]).endpoint(Some(bad)).resolve_endpoint().is_err(),
                "{bad}"
            );
        }
        assert!(
            setup(&[])
                .endpoint(Some("http://127.0.0.1:4318/v1/traces"))
                .resolve_endpoint()
                .is_ok()
        );
    }
}
