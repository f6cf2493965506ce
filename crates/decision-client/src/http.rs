//! HTTP plumbing shared by every remote adapter (the decision adapters here and the
//! chat-completions summarizer in the `summarizer` crate): one JSON POST with a bearer key, a
//! hard timeout, a cap on the response body ([`DEFAULT_MAX_RESPONSE_BYTES`], set with
//! `JsonClient::with_max_response_bytes` or [`MAX_RESPONSE_BYTES_ENV`]), and status codes
//! mapped to typed errors.
//!
//! The client itself (`JsonClient`, reqwest) is behind the `http` feature; the rest of this
//! module (keys, errors, URLs, redaction) is pure and builds without it, so the offline model
//! and the config parsers never pull in reqwest.
//!
//! Secrets: an [`ApiKey`] only comes from the environment, its `Debug` and `Display` are
//! redacted, and no error built here ever contains it. The config keys that name the key's
//! variable (`decision_api_key_env`, `decision_chat_api_key_env`, `summarizer_api_key_env`)
//! accept only [`is_env_var_name`] names, and a refused value is described by
//! [`describe_non_env_var_name`], never shown: the usual mistake is pasting the key itself.

#[cfg(feature = "http")]
mod client;
#[cfg(feature = "http")]
pub use client::{JsonClient, JsonResponse};

use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// A bearer key read from the environment. Never printed.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Reads `var` from the environment; `None` when unset or blank.
    pub fn from_env(var: &str) -> Option<ApiKey> {
        ApiKey::from_lookup(var, |name| std::env::var(name).ok())
    }

    /// Reads `var` through `lookup` (the process environment, or a map in tests); `None` when
    /// unset or blank.
    pub fn from_lookup(var: &str, lookup: impl Fn(&str) -> Option<String>) -> Option<ApiKey> {
        lookup(var)
            .filter(|v| !v.trim().is_empty())
            .map(|v| ApiKey(v.trim().to_owned()))
    }

    /// Wraps a key a caller obtained from the environment by other means (a secret store).
    pub fn new(secret: impl Into<String>) -> ApiKey {
        ApiKey(secret.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The form every `*_api_key_env` config key accepts, for its error message.
pub const ENV_VAR_NAME_FORM: &str = "an environment variable name such as OPENROUTER_API_KEY \
     (upper-case letters, digits and _, not starting with a digit)";

/// Whether `name` is a conventional environment variable name, `^[A-Z_][A-Z0-9_]*$`. The
/// `*_api_key_env` keys accept nothing else: most API keys contain a lower-case letter or a
/// `-`, so a key pasted in place of its variable's name is refused. Such a name is not a
/// secret and may be printed; anything else must not be.
pub fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The `found` part of the error for a `*_api_key_env` value that is not an
/// [`is_env_var_name`] name: its JSON type and, for a string, its length, never its content.
pub fn describe_non_env_var_name(value: &Value) -> String {
    match value {
        Value::String(s) => format!(
            "a value of {} characters that is not an environment variable name; if it is the \
             API key itself, put it in an environment variable and name that variable here",
            s.chars().count()
        ),
        Value::Null => "null".to_owned(),
        Value::Bool(_) => "a boolean".to_owned(),
        Value::Number(_) => "a number".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// How a selection reason or an error names the key variable `name`: the name when
/// [`is_env_var_name`] accepts it, otherwise a placeholder (the value may be the key itself).
pub fn shown_env_var_name(name: &str) -> &str {
    if is_env_var_name(name) {
        name
    } else {
        "<invalid variable name, not shown>"
    }
}

/// What can go wrong with one HTTP call. Messages name the URL, never the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// No answer within the timeout.
    #[error("{url}: no answer within {timeout:?}")]
    Timeout {
        /// The endpoint.
        url: String,
        /// The timeout.
        timeout: Duration,
    },
    /// 401 or 403.
    #[error("{url}: unauthorized (HTTP {status}); check the API key variable")]
    Unauthorized {
        /// The endpoint.
        url: String,
        /// The status.
        status: u16,
    },
    /// 429.
    #[error("{url}: rate limited (HTTP 429){}", retry_after.as_ref().map(|r| format!(", retry after {r}")).unwrap_or_default())]
    RateLimited {
        /// The endpoint.
        url: String,
        /// The `Retry-After` header, when sent.
        retry_after: Option<String>,
    },
    /// Any other non-success status.
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body (at most 300 characters).
        body: String,
    },
    /// The body was not the JSON expected.
    #[error("{url}: malformed response: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// The answer was longer than the cap; reading stopped there.
    #[error(
        "{url}: the answer is larger than the {limit}-byte limit; stopped reading it (raise \
         {MAX_RESPONSE_BYTES_ENV} if this host's answers really are that large)"
    )]
    TooLarge {
        /// The endpoint.
        url: String,
        /// The cap in bytes.
        limit: usize,
    },
    /// A setting of the HTTP client from the environment is malformed.
    #[error("{variable} is {value:?}; expected {expected}")]
    BadSetting {
        /// The environment variable.
        variable: &'static str,
        /// Its value (at most 40 characters).
        value: String,
        /// The form expected.
        expected: &'static str,
    },
    /// Connection-level failure.
    #[error("{url}: transport error: {reason}")]
    Transport {
        /// The endpoint.
        url: String,
        /// What failed.
        reason: String,
    },
}

/// The largest response body read by default: 4 MiB. A decision reply is a few hundred bytes
/// and a summary a few kilobytes, so only a broken or hostile host sends more.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The environment variable that overrides [`DEFAULT_MAX_RESPONSE_BYTES`] for every remote
/// model of the process (a positive number of bytes).
pub const MAX_RESPONSE_BYTES_ENV: &str = "COMPACTION_MAX_RESPONSE_BYTES";

/// The response cap from `lookup` ([`MAX_RESPONSE_BYTES_ENV`]), or the default when unset or
/// blank; anything but a positive integer is an error naming the variable.
pub fn max_response_bytes_from(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<usize, HttpError> {
    match lookup(MAX_RESPONSE_BYTES_ENV) {
        None => Ok(DEFAULT_MAX_RESPONSE_BYTES),
        Some(v) if v.trim().is_empty() => Ok(DEFAULT_MAX_RESPONSE_BYTES),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(HttpError::BadSetting {
                variable: MAX_RESPONSE_BYTES_ENV,
                value: v.chars().take(40).collect(),
                expected: "a positive number of bytes, such as 4194304",
            }),
        },
    }
}

impl HttpError {
    /// What kind of failure this is, for the engine's outcome.
    pub fn failure_kind(&self) -> compaction_core::FailureKind {
        use compaction_core::FailureKind;
        match self {
            HttpError::Timeout { .. } => FailureKind::Timeout,
            HttpError::Unauthorized { status, .. } | HttpError::Status { status, .. } => {
                FailureKind::HttpStatus(*status)
            }
            HttpError::RateLimited { .. } => FailureKind::HttpStatus(429),
            HttpError::Malformed { .. } => FailureKind::InvalidReply,
            HttpError::Transport { .. } => FailureKind::Transport,
            HttpError::TooLarge { .. } => FailureKind::InvalidReply,
            HttpError::BadSetting { .. } => FailureKind::Other,
        }
    }
}

/// The shortest run of a key's characters [`redacted`] treats as a leak: eight.
pub const MIN_KEY_FRAGMENT_CHARS: usize = 8;

/// `text` with the key, and every fragment of it of [`MIN_KEY_FRAGMENT_CHARS`] or more
/// characters, replaced by `<redacted>`, for a host that echoes the request's headers (or
/// parts of the key) back in an error body. A key shorter than that is replaced only whole.
pub fn redacted(text: &str, key: Option<&ApiKey>) -> String {
    let Some(key) = key.map(ApiKey::expose).filter(|k| !k.is_empty()) else {
        return text.to_owned();
    };
    let key: Vec<char> = key.chars().collect();
    if key.len() < MIN_KEY_FRAGMENT_CHARS {
        return text.replace(&key.iter().collect::<String>(), "<redacted>");
    }
    // Every window of the key's characters; a text window found among them is a leak, and
    // every longer fragment is a chain of such windows.
    let windows: std::collections::HashSet<&[char]> = key.windows(MIN_KEY_FRAGMENT_CHARS).collect();
    let chars: Vec<char> = text.chars().collect();
    let mut leaked = vec![false; chars.len()];
    for (i, window) in chars.windows(MIN_KEY_FRAGMENT_CHARS).enumerate() {
        if windows.contains(window) {
            leaked[i..i + MIN_KEY_FRAGMENT_CHARS].fill(true);
        }
    }
    let mut out = String::with_capacity(text.len());
    for (i, c) in chars.iter().enumerate() {
        match (leaked[i], i > 0 && leaked[i - 1]) {
            (true, false) => out.push_str("<redacted>"),
            (true, true) => {}
            (false, _) => out.push(*c),
        }
    }
    out
}

/// The host (and port) of a URL, for `ModelInfo::provider`: `https://openrouter.ai/api` gives
/// `openrouter.ai`; never any `user:password@` part. Empty when `url` is not a URL with a host.
pub fn host_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => match (parsed.host_str(), parsed.port()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_owned(),
            (None, _) => String::new(),
        },
        Err(_) => String::new(),
    }
}

/// True when the URL carries credentials (`user:password@host`): such a URL must not be
/// configured, since URLs are shown in banners, errors and spans. A text that does not parse
/// as a URL counts as carrying them when it has an `@` (it cannot be shown safely either).
pub fn has_credentials(url: &str) -> bool {
    match url::Url::parse(url) {
        Ok(parsed) => !parsed.username().is_empty() || parsed.password().is_some(),
        Err(_) => url.contains('@'),
    }
}

/// Whether `url` is an absolute `http://` or `https://` URL with a host, as every base-URL
/// key requires.
pub fn is_http_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    })
}

/// What a base-URL key expects instead of a URL with credentials.
pub const NO_CREDENTIALS_FORM: &str = "a URL without credentials (no user:password@ part; the \
     API key belongs in the environment variable the *_api_key_env key names)";

/// Joins a base URL and a path with exactly one slash.
pub fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_redacted() {
        let key = ApiKey::new("sk-secret-123");
        assert!(!format!("{key:?} {key}").contains("sk-secret"));
    }

    /// Issue 20 item 5: a host that echoes the key's first 20 and last 12 characters gets
    /// neither printed; fragments shorter than eight characters, and other text, are kept.
    #[test]
    fn fragments_of_the_key_of_eight_or_more_characters_are_redacted() {
        let secret = "sk-or-v1-0123456789abcdefTOPSECRETxyz9";
        let key = ApiKey::new(secret);
        let (head, tail) = (&secret[..20], &secret[secret.len() - 12..]);
        let echoed = format!("invalid key {head}... (ends {tail}); whole: {secret}");
        let shown = redacted(&echoed, Some(&key));
        assert_eq!(
            shown,
            "invalid key <redacted>... (ends <redacted>); whole: <redacted>"
        );
        let short = &secret[..7];
        assert_eq!(redacted(short, Some(&key)), short);
        assert_eq!(redacted("no key here", Some(&key)), "no key here");
        let tiny = ApiKey::new("k1");
        assert_eq!(
            redacted("k1 and k12", Some(&tiny)),
            "<redacted> and <redacted>2"
        );
    }
    #[test]
    fn the_cap_comes_from_the_environment_or_the_default() {
        assert_eq!(
            max_response_bytes_from(|_| None).expect("default"),
            DEFAULT_MAX_RESPONSE_BYTES
        );
        assert_eq!(
            max_response_bytes_from(|_| Some("1024".into())).expect("set"),
            1024
        );
        let err = max_response_bytes_from(|_| Some("lots".into())).unwrap_err();
        assert!(err.to_string().contains(MAX_RESPONSE_BYTES_ENV), "{err}");
    }

    #[test]
    fn hosts_drop_scheme_path_and_credentials() {
        assert_eq!(host_of("https://openrouter.ai/api"), "openrouter.ai");
        assert_eq!(host_of("http://127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(host_of("http://u:pw@localhost:1/x"), "localhost:1");
        assert_eq!(host_of("https://OpenRouter.ai:443/api"), "openrouter.ai");
        assert_eq!(host_of("not a url"), "");
    }

    #[test]
    fn credentials_and_http_urls_are_read_by_the_url_parser() {
        assert!(has_credentials("https://me:pw@host/x"));
        assert!(has_credentials("https://me@host/x"));
        assert!(!has_credentials("https://host/x?email=a@b"));
        assert!(is_http_url("http://127.0.0.1:8080/v1"));
        for bad in [
            "openrouter.ai",
            "ftp://host",
            "http://",
            "https://exa mple.com",
        ] {
            assert!(!is_http_url(bad), "{bad}");
        }
    }

    #[test]
    fn lookup_ignores_blank_values() {
        assert!(ApiKey::from_lookup("K", |_| Some("  ".into())).is_none());
        assert!(ApiKey::from_lookup("K", |_| None).is_none());
        let key = ApiKey::from_lookup("K", |_| Some(" sk-1 ".into()));
        assert_eq!(key.map(|k| k.expose().to_owned()).as_deref(), Some("sk-1"));
    }

    #[test]
    fn env_var_names_are_upper_case_digits_and_underscores() {
        for name in [
            "OPENROUTER_API_KEY",
            "INCEPTION_API_KEY",
            "E2E_DECISION_KEY",
            "_PRIVATE",
            "A",
            "K1",
        ] {
            assert!(is_env_var_name(name), "{name}");
            assert_eq!(shown_env_var_name(name), name);
        }
        for bad in [
            "",
            "1KEY",
            "MY KEY",
            "openrouter_api_key",
            "Openrouter_Api_Key",
            "MY-KEY",
            "KEY\n",
            "SCHLÜSSEL",
            "sk-or-v1-0123456789abcdefTOPSECRET",
            "gsk_abcdefTOPSECRET0123",
        ] {
            assert!(!is_env_var_name(bad), "{bad:?}");
            assert_eq!(
                shown_env_var_name(bad),
                "<invalid variable name, not shown>"
            );
        }
    }

    #[test]
    fn a_refused_value_is_described_not_shown() {
        let secret = "sk-or-v1-0123456789abcdefTOPSECRET";
        let text = describe_non_env_var_name(&Value::String(secret.into()));
        assert!(
            text.starts_with("a value of 34 characters that is not"),
            "{text}"
        );
        assert!(!text.contains("TOPSECRET"), "{text}");
        assert_eq!(describe_non_env_var_name(&Value::Null), "null");
        assert_eq!(
            describe_non_env_var_name(&serde_json::json!(12345)),
            "a number"
        );
        assert_eq!(
            describe_non_env_var_name(&serde_json::json!({"k": secret})),
            "an object"
        );
    }

    #[test]
    fn joins_urls() {
        assert_eq!(join_url("https://a/api/", "/v1/x"), "https://a/api/v1/x");
    }
}
