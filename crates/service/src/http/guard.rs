//! The request guard: what a hostile web page or a DNS-rebinding host can never do through the
//! service. It runs before any handler, on every route:
//!
//! 1. **Host allow-list**: `localhost`, `127.0.0.1`, `[::1]`, the bound address and each
//!    [`GuardOptions::allow_host`]; any other `Host` (a rebinding name) answers 421.
//! 2. **No cross-origin writes**: a state-changing request (POST, PUT, PATCH, DELETE) needs
//!    `Content-Type: application/json` (415 otherwise: an HTML form or a "simple" `text/plain`
//!    fetch can never send it without a preflight) and, when it carries an `Origin`, an origin
//!    whose host is allowed or that is one of [`GuardOptions::cors_origin`] (403 otherwise).
//! 3. **A token** when one is set ([`GuardOptions::token`]): `Authorization: Bearer <token>` or
//!    the `HttpOnly; SameSite=Strict` cookie that the login URL (`/?token=<token>`) sets before
//!    redirecting to `/` without the token. `/healthz` and `/readyz` answer without it (they say
//!    nothing about a session). Compared in constant time; never logged or shown by `Debug`.
//! 4. **Security headers** on every answer: a strict `Content-Security-Policy`
//!    (`default-src 'self'; frame-ancestors 'none'; base-uri 'none'`), `X-Content-Type-Options:
//!    nosniff`, `Referrer-Policy: no-referrer`, and `Cache-Control: no-store` on `/v1/` answers.
//! 5. **CORS only when asked**: no CORS header by default; an origin given with
//!    [`GuardOptions::cors_origin`] gets `Access-Control-Allow-Origin` and its preflights.
//!
//! Refusals carry the service's JSON error shape. The guard never reads a body.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The cookie the login URL sets.
pub(super) const TOKEN_COOKIE: &str = "compaction_token";
/// The content security policy of every answer.
pub(super) const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The host names always allowed: loopback.
const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "[::1]", "::1"];
/// Paths answered without a token (liveness and readiness say nothing about a session).
const OPEN_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// A secret token. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token; `None` when empty or not printable ASCII (it travels in headers and URLs).
    pub fn new(secret: impl Into<String>) -> Option<Token> {
        let secret = secret.into();
        let usable = !secret.is_empty()
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'));
        usable.then_some(Token(secret))
    }

    /// The secret, for the one place that shows it (the login URL printed at start).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where `offered` first differs.
    fn matches(&self, offered: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), offered.as_bytes());
        let mut diff = a.len() ^ b.len();
        for (i, x) in a.iter().enumerate() {
            diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
        }
        diff == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// What the guard allows beyond its defaults.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct GuardOptions {
    /// Extra host names (`Host` header, port ignored); `*` allows any host (only sensible with a
    /// token).
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) allowed to call the API from another page.
    pub cors_origins: Vec<String>,
    /// The token every request needs, when set.
    pub token: Option<Token>,
}

impl GuardOptions {
    /// Allows `host` (a name or address, without port).
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// Allows cross-origin calls from `origin`.
    pub fn cors_origin(mut self, origin: impl Into<String>) -> Self {
        self.cors_origins
            .push(origin.into().trim_end_matches('/').to_ascii_lowercase());
        self
    }

    /// Requires `token` on every request.
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }
}

/// The guard's state: its options and the bound address.
#[derive(Debug)]
pub(crate) struct Guard {
    options: GuardOptions,
    bound_host: Option<String>,
}

impl Guard {
    pub(crate) fn new(options: GuardOptions, bound: Option<std::net::SocketAddr>) -> Guard {
        let bound_host = bound.map(|a| match a.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            std::net::IpAddr::V4(ip) => ip.to_string(),
        });
        Guard {
            options,
            bound_host,
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        LOOPBACK_HOSTS.contains(&host.as_str())
            || self.bound_host.as_deref() == Some(host.as_str())
            || self
                .options
                .allowed_hosts
                .iter()
                .any(|h| h == "*" || *h == host)
    }

    fn cors_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        self.options.cors_origins.contains(&origin)
    }
}

/// The host part of a `Host` header or an origin's authority (`[::1]:8080` → `[::1]`).
fn host_of(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            authority
        }
    })
}

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    super::shape::error(status, message)
}

/// The request's host: its `Host` header, else the URI's authority (HTTP/2).
fn request_host(headers: &HeaderMap, uri: &Uri) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// The token a request offers: its bearer token, else its cookie.
fn offered_token(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned());
    bearer.or_else(|| {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                (name == TOKEN_COOKIE).then(|| value.to_owned())
            })
    })
}

/// The `token` query parameter of a login URL.
fn login_token(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// The middleware: checks, then adds the security headers to whatever answers.
pub(crate) async fn guard(State(g): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let api = request.uri().path().starts_with("/v1/");
    let mut response = match check(&g, &request, origin.as_deref()) {
        Some(answer) => answer,
        None => next.run(request).await,
    };
    decorate(&g, &mut response, origin.as_deref(), api);
    response
}

/// `Some` answers without a handler (a refusal, a login, a preflight); `None` passes the
/// request on.
fn check(g: &Guard, request: &Request, origin: Option<&str>) -> Option<Response> {
    let headers = request.headers();
    let host = request_host(headers, request.uri()).unwrap_or_default();
    if !g.host_allowed(host_of(&host)) {
        return Some(refuse(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "host {:?} is not served here: allowed are localhost, 127.0.0.1, [::1], the bound \
                 address and --allowed-host names",
                host_of(&host)
            ),
        ));
    }
    let cross_origin_allowed = origin.is_some_and(|o| g.cors_allowed(o));
    if request.method() == Method::OPTIONS {
        return Some(preflight(cross_origin_allowed));
    }
    if let Some(token) = &g.options.token
        && !OPEN_PATHS.contains(&request.uri().path())
    {
        if request.method() == Method::GET
            && request.uri().path() == "/"
            && let Some(offered) = login_token(request.uri())
        {
            return Some(if token.matches(offered) {
                login(token)
            } else {
                refuse(StatusCode::UNAUTHORIZED, "wrong token in the login URL")
            });
        }
        if !offered_token(headers).is_some_and(|t| token.matches(&t)) {
            return Some(refuse(
                StatusCode::UNAUTHORIZED,
                "a token is required: send `Authorization: Bearer <token>` or open the login URL \
                 printed at start",
            ));
        }
    }
    if is_write(request.method()) {
        if !is_json(headers) {
            return Some(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a request that changes state needs `Content-Type: application/json`",
            ));
        }
        if let Some(origin) = origin {
            let same_site = origin
                .split_once("://")
                .is_some_and(|(_, authority)| g.host_allowed(host_of(authority)));
            if !same_site && !cross_origin_allowed {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    format!(
                        "origin {origin:?} may not change state here (no --cors-origin allows it)"
                    ),
                ));
            }
        }
    }
    None
}

/// An `OPTIONS` answer: the methods, and for an allowed cross origin its preflight grant.
fn preflight(cross_origin_allowed: bool) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let h = response.headers_mut();
    h.insert(
        header::ALLOW,
        HeaderValue::from_static("GET, POST, PUT, OPTIONS"),
    );
    if cross_origin_allowed {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("content-type, authorization, if-match"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    response
}

/// The login URL's answer: the cookie, and a redirect to `/` that drops the token.
fn login(token: &Token) -> Response {
    let cookie = format!(
        "{TOKEN_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        token.expose()
    );
    let mut response = Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(header::LOCATION, "/")
        .body(Body::empty())
        .unwrap_or_default();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

fn decorate(g: &Guard, response: &mut Response, origin: Option<&str>, api: bool) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if api {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if let Some(origin) = origin.filter(|o| g.cors_allowed(o))
        && let Ok(v) = HeaderValue::from_str(origin)
    {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("etag"),
        );
        h.append(header::VARY, HeaderValue::from_static("origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_lose_their_port() {
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8080"), "[::1]");
        assert_eq!(host_of("[::1]"), "[::1]");
        assert_eq!(host_of("localhost"), "localhost");
        assert_eq!(host_of("evil.example:80"), "evil.example");
    }

    #[test]
    fn tokens_compare_whole_and_hide_in_debug() {
        let t = Token::new("s3cret-token").unwrap();
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-toke"));
        assert!(!t.matches("s3cret-token1"));
        assert!(!t.matches(""));
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        assert!(Token::new("").is_none());
        assert!(Token::new("has space").is_none());
    }

    #[test]
    fn the_allow_list_has_loopback_the_bound_address_and_extra_names() {
        let g = Guard::new(
            GuardOptions::default().allow_host("Box.Lan"),
            Some("10.0.0.5:9000".parse().unwrap()),
        );
        for ok in ["localhost", "127.0.0.1", "[::1]", "10.0.0.5", "box.lan"] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example", "10.0.0.6", "", "localhost.evil.example"] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
    }
}
