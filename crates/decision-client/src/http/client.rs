//! The reqwest client behind [`JsonClient`] (feature `http`): one JSON POST with a bearer key,
//! one timeout for the whole exchange and a cap on the answer's size. Everything else of the
//! plumbing (keys, errors, URLs, redaction) is in the parent module and builds without reqwest.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::{ApiKey, HttpError, max_response_bytes_from, redacted};

/// A JSON-over-HTTP client with one timeout for the whole exchange and a cap on the size of
/// the answer.
#[derive(Debug, Clone)]
pub struct JsonClient {
    client: reqwest::Client,
    timeout: Duration,
    max_response_bytes: usize,
}

/// A successful JSON response.
#[derive(Debug, Clone)]
pub struct JsonResponse {
    /// The parsed body.
    pub body: Value,
}

impl JsonClient {
    /// A client whose every call fails with [`HttpError::Timeout`] after `timeout`, and with
    /// [`HttpError::TooLarge`] when an answer exceeds the cap: [`MAX_RESPONSE_BYTES_ENV`](super::MAX_RESPONSE_BYTES_ENV) from
    /// the process environment, or [`DEFAULT_MAX_RESPONSE_BYTES`](super::DEFAULT_MAX_RESPONSE_BYTES).
    pub fn new(timeout: Duration) -> Result<JsonClient, HttpError> {
        let max_response_bytes = max_response_bytes_from(|name| std::env::var(name).ok())?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| HttpError::Transport {
                url: String::new(),
                reason: e.to_string(),
            })?;
        Ok(JsonClient {
            client,
            timeout,
            max_response_bytes,
        })
    }

    /// The same client with another response cap (builder style).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> JsonClient {
        self.max_response_bytes = bytes;
        self
    }

    /// The timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The response cap in bytes.
    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    /// Reads the body, at most the cap: a `Content-Length` above it is refused before
    /// reading, and reading stops as soon as the body passes it.
    async fn read_capped(
        &self,
        url: &str,
        mut response: reqwest::Response,
    ) -> Result<String, HttpError> {
        let limit = self.max_response_bytes;
        let too_large = || HttpError::TooLarge {
            url: url.to_owned(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.map_reqwest(url, &e))?
        {
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// POSTs `body` as JSON to `url` with an optional bearer key and parses the JSON answer.
    pub async fn post_json<B: Serialize + ?Sized>(
        &self,
        url: &str,
        key: Option<&ApiKey>,
        body: &B,
    ) -> Result<JsonResponse, HttpError> {
        let mut request = self.client.post(url).json(body);
        if let Some(key) = key {
            request = request.bearer_auth(key.expose());
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.map_reqwest(url, &e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = self.read_capped(url, response).await?;
        let url_owned = url.to_owned();
        match status.as_u16() {
            200..=299 => serde_json::from_str(&text)
                .map(|body| JsonResponse { body })
                .map_err(|e| HttpError::Malformed {
                    url: url_owned,
                    reason: format!("invalid JSON: {e}"),
                }),
            401 | 403 => Err(HttpError::Unauthorized {
                url: url_owned,
                status: status.as_u16(),
            }),
            429 => Err(HttpError::RateLimited {
                url: url_owned,
                retry_after,
            }),
            code => Err(HttpError::Status {
                url: url_owned,
                status: code,
                body: redacted(&text, key).chars().take(300).collect(),
            }),
        }
    }

    fn map_reqwest(&self, url: &str, e: &reqwest::Error) -> HttpError {
        if e.is_timeout() {
            HttpError::Timeout {
                url: url.to_owned(),
                timeout: self.timeout,
            }
        } else {
            // reqwest's Display names the URL but never the headers, so the key cannot leak.
            HttpError::Transport {
                url: url.to_owned(),
                reason: e.to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_MAX_RESPONSE_BYTES;
    use super::*;

    /// Issue 20 item 10: an answer above the cap is refused (before reading it whole when it
    /// declares its length, and while streaming when it does not), naming the URL and limit.
    #[tokio::test]
    async fn an_answer_over_the_cap_is_refused() {
        use wiremock::matchers::method;
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        let big = serde_json::json!({ "text": "x".repeat(64 * 1024) });
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(&big))
            .mount(&server)
            .await;
        let client = JsonClient::new(Duration::from_secs(5))
            .expect("client")
            .with_max_response_bytes(16 * 1024);
        let url = server.uri();
        let err = client
            .post_json(&url, None, &serde_json::json!({}))
            .await
            .expect_err("over the cap");
        assert!(
            matches!(err, HttpError::TooLarge { limit: 16_384, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(&url), "{err}");
        let roomy = client.with_max_response_bytes(DEFAULT_MAX_RESPONSE_BYTES);
        let ok = roomy
            .post_json(&url, None, &serde_json::json!({}))
            .await
            .expect("under the cap");
        assert_eq!(ok.body, big);
    }
}
