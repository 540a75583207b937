//! The HTTP machinery shared by every wire protocol: one reqwest client per provider with a
//! connect timeout and a per-attempt timeout, a retry loop with exponential backoff and full
//! jitter on 429, 5xx, timeouts, connection failures and success answers whose body is not JSON
//! (honouring `Retry-After`), and precise, non-retried errors on 4xx. Every message that leaves this module has been passed through
//! [`redact`] with the provider's key.

use crate::{redact, LlmError, ProviderConfig, Secret};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::StatusCode;
use std::time::{Duration, Instant, SystemTime};

/// The longest wait a server can ask for with `Retry-After` and still be obeyed; asking for
/// more ends the retries at once (a quota reset hours away is not worth waiting for).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// How many characters of a vendor's error message or of a body are kept in an error.
pub const EXCERPT_CHARS: usize = 500;

/// A provider's connection: its client, settings and key.
pub struct HttpClient {
    client: reqwest::Client,
    config: ProviderConfig,
    key: Option<Secret>,
    timeout: Duration,
}

/// A successful (2xx) answer, already parsed as JSON.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// The response body.
    pub body: serde_json::Value,
    /// HTTP attempts made, 1 when the first one succeeded.
    pub attempts: u32,
    /// From the start of the first attempt to the end of the last body, waits included.
    pub latency: Duration,
}

/// How one attempt ended, when it did not succeed.
enum Failure {
    /// Worth another attempt; `retry_after` is the server's requested wait, if any.
    Transient {
        error: LlmError,
        retry_after: Option<Duration>,
    },
    /// Final.
    Fatal(LlmError),
}

fn seconds(field: &str, provider: &str, value: f64) -> Result<Duration, LlmError> {
    if value > 0.0 {
        if let Ok(d) = Duration::try_from_secs_f64(value) {
            return Ok(d);
        }
    }
    Err(LlmError::Config(format!(
        "providers.{provider}.{field}: must be a positive number of seconds (got {value})"
    )))
}

impl HttpClient {
    /// A client for `config`'s endpoint, sending `key` if given; [`LlmError::Config`] when a
    /// timeout is not a positive number of seconds.
    pub fn new(config: &ProviderConfig, key: Option<Secret>) -> Result<HttpClient, LlmError> {
        let timeout = seconds("timeout_s", &config.name, config.timeout_s)?;
        let connect_timeout = seconds("connect_timeout_s", &config.name, config.connect_timeout_s)?;
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("{}: cannot create the HTTP client: {e}", config.name)))?;
        Ok(HttpClient {
            client,
            config: config.clone(),
            key,
            timeout,
        })
    }

    /// The provider configuration it was made from.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The API key it sends; `None` for servers without keys.
    pub fn key(&self) -> Option<&Secret> {
        self.key.as_ref()
    }

    /// `text` with the provider's key removed.
    pub fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(k) => redact(text, &[k]),
            None => text.to_string(),
        }
    }

    /// A redacted excerpt of `text`, at most [`EXCERPT_CHARS`] characters.
    pub fn excerpt(&self, text: &str) -> String {
        truncate_chars(self.redact(text).trim(), EXCERPT_CHARS)
    }

    /// `MalformedResponse` with `what` and an excerpt of the body.
    pub fn malformed(&self, what: &str, body: &serde_json::Value) -> LlmError {
        LlmError::MalformedResponse {
            provider: self.config.name.clone(),
            message: format!("{what}; the body was: {}", self.excerpt(&body.to_string())),
        }
    }

    /// POSTs `body` as JSON to `url` with `headers`, retrying transient failures, and returns
    /// the parsed JSON of the first 2xx answer.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &serde_json::Value,
    ) -> Result<HttpReply, LlmError> {
        let mut header_map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| LlmError::Config(format!("{}: bad header name {name}: {e}", self.config.name)))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                LlmError::Config(format!(
                    "{}: the value of header {name} is not valid in HTTP (a key with a newline or non-ASCII characters?)",
                    self.config.name
                ))
            })?;
            value.set_sensitive(true);
            header_map.insert(name, value);
        }
        let payload = serde_json::to_vec(body)
            .map_err(|e| LlmError::Config(format!("{}: cannot encode the request: {e}", self.config.name)))?;

        let start = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let failure = match self.attempt(url, &header_map, &payload, attempts).await {
                Ok(body) => {
                    return Ok(HttpReply {
                        body,
                        attempts,
                        latency: start.elapsed(),
                    })
                }
                Err(f) => f,
            };
            let (error, retry_after) = match failure {
                Failure::Fatal(e) => return Err(e),
                Failure::Transient { error, retry_after } => (error, retry_after),
            };
            if attempts > self.config.max_retries {
                return Err(error);
            }
            let wait = match retry_after {
                Some(d) if d > MAX_RETRY_AFTER => return Err(with_note(error, &too_long_note(d))),
                Some(d) => d,
                None => backoff(
                    self.config.retry_base_delay_s,
                    self.config.retry_max_delay_s,
                    attempts - 1,
                ),
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt; `attempts` counts it, for error messages.
    async fn attempt(
        &self,
        url: &str,
        headers: &HeaderMap,
        payload: &[u8],
        attempts: u32,
    ) -> Result<serde_json::Value, Failure> {
        let provider = &self.config.name;
        let sent = self
            .client
            .post(url)
            .headers(headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(payload.to_vec())
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return Err(self.transport_failure(url, &e, attempts)),
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let text = match response.text().await {
            Ok(t) => t,
            // The server answered, then the body broke off: not a connection problem.
            Err(e) if !e.is_timeout() => {
                return Err(Failure::Transient {
                    error: LlmError::Interrupted {
                        provider: provider.clone(),
                        url: self.redact(url),
                        status: status.as_u16(),
                        attempts,
                        message: self.excerpt(&error_chain(&e)),
                    },
                    retry_after: None,
                })
            }
            Err(e) => return Err(self.transport_failure(url, &e, attempts)),
        };

        if status.is_success() {
            // Not JSON at all (empty, an HTML error page, garbage): the endpoint or a proxy
            // misbehaved, not the model; worth another attempt like a 5xx.
            return serde_json::from_str(&text).map_err(|e| Failure::Transient {
                error: LlmError::NotJson {
                    provider: provider.clone(),
                    url: self.redact(url),
                    status: status.as_u16(),
                    attempts,
                    message: if text.trim().is_empty() {
                        "the body was empty".to_string()
                    } else {
                        format!("{e}; it was: {}", self.excerpt(&text))
                    },
                },
                retry_after: None,
            });
        }

        let message = self.error_message(status, &text);
        let code = status.as_u16();
        if code == 429 || status.is_server_error() {
            let retry_after = if code == 429 || code == 503 { retry_after } else { None };
            return Err(Failure::Transient {
                error: LlmError::Http {
                    provider: provider.clone(),
                    status: code,
                    attempts,
                    message,
                },
                retry_after,
            });
        }
        Err(Failure::Fatal(match code {
            401 | 403 => LlmError::Auth {
                provider: provider.clone(),
                status: code,
                env: match &self.config.api_key_env {
                    Some(env) => env.clone(),
                    None => {
                        "the API key (no `api_key_env` is configured for this provider, so none was sent)".to_string()
                    }
                },
                message,
            },
            404 => LlmError::NotFound {
                provider: provider.clone(),
                url: self.redact(url),
                model: self.config.model.clone(),
                message,
            },
            400..=499 => LlmError::BadRequest {
                provider: provider.clone(),
                status: code,
                message,
            },
            _ => LlmError::Http {
                provider: provider.clone(),
                status: code,
                attempts,
                message,
            },
        }))
    }

    fn transport_failure(&self, url: &str, e: &reqwest::Error, attempts: u32) -> Failure {
        let error = if e.is_timeout() && !e.is_connect() {
            LlmError::Timeout {
                provider: self.config.name.clone(),
                attempts,
                after: self.timeout,
            }
        } else {
            LlmError::Connect {
                provider: self.config.name.clone(),
                url: self.redact(url),
                attempts,
                message: self.excerpt(&error_chain(e)),
            }
        };
        Failure::Transient {
            error,
            retry_after: None,
        }
    }

    /// The vendor's message from an error body (redacted, bounded), or an excerpt of the body.
    fn error_message(&self, status: StatusCode, body: &str) -> String {
        let extracted = vendor_error_message(body).unwrap_or_else(|| body.trim().to_string());
        if extracted.is_empty() {
            return status.canonical_reason().unwrap_or("no message").to_string();
        }
        self.excerpt(&extracted)
    }
}

/// The attempt count of a transient error is the one it was made with; this adds a note.
fn with_note(error: LlmError, note: &str) -> LlmError {
    match error {
        LlmError::Http {
            provider,
            status,
            attempts,
            message,
        } => LlmError::Http {
            provider,
            status,
            attempts,
            message: format!("{message} ({note})"),
        },
        other => other,
    }
}

fn too_long_note(d: Duration) -> String {
    format!(
        "the server asked to retry after {} s, more than the {} s this client is willing to wait, so it gave up",
        d.as_secs(),
        MAX_RETRY_AFTER.as_secs()
    )
}

/// reqwest's error with its causes ("error sending request: connection refused").
fn error_chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// Full-jitter exponential backoff: uniform in `[0, min(max, base * 2^retry)]`, `retry`
/// counting from 0 for the wait after the first attempt.
pub fn backoff(base_s: f64, max_s: f64, retry: u32) -> Duration {
    let sane = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
    let ceiling = (sane(base_s) * 2f64.powi(retry.min(60) as i32)).min(sane(max_s));
    if ceiling <= 0.0 {
        return Duration::ZERO;
    }
    let secs = rand::random_range(0.0..=ceiling);
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO)
}

/// `Retry-After` as delta-seconds or an HTTP-date (relative to `now`; a date in the past means
/// no wait). `None` when unparsable.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        // Not in the standard, but some servers send fractions.
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The message in a vendor's JSON error body: OpenAI `{"error":{"message"}}`, Anthropic
/// `{"type":"error","error":{"type","message"}}`, Gemini `{"error":{"message","status"}}`, and
/// the shapes of common compatible servers (`{"error":"..."}`, `{"message":...}`,
/// `{"detail":...}`).
pub fn vendor_error_message(body: &str) -> Option<String> {
    let json: serde_json::Value = serde_json::from_str(body).ok()?;
    let json = match &json {
        // Gemini sometimes wraps the error in a one-element list.
        serde_json::Value::Array(items) if items.len() == 1 => &items[0],
        other => other,
    };
    let error = json.get("error");
    if let Some(serde_json::Value::String(s)) = error {
        return Some(s.clone());
    }
    if let Some(message) = error.and_then(|e| e.get("message")).and_then(|m| m.as_str()) {
        let label = error
            .and_then(|e| e.get("status").or_else(|| e.get("type")).or_else(|| e.get("code")))
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty() && !message.contains(s));
        return Some(match label {
            Some(label) => format!("{message} [{label}]"),
            None => message.to_string(),
        });
    }
    for field in ["message", "detail"] {
        match json.get(field) {
            Some(serde_json::Value::String(s)) => return Some(s.clone()),
            Some(v @ (serde_json::Value::Array(_) | serde_json::Value::Object(_))) => return Some(v.to_string()),
            _ => {}
        }
    }
    None
}

/// At most `max` characters of `text`, with `...` when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("0.5", now), Some(Duration::from_millis(500)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        for retry in 0..20 {
            let d = backoff(0.5, 4.0, retry).as_secs_f64();
            let ceiling = (0.5 * 2f64.powi(retry as i32)).min(4.0);
            assert!((0.0..=ceiling).contains(&d), "retry {retry}: {d} > {ceiling}");
        }
        // Full jitter: draws spread over the range rather than sitting at the ceiling.
        let draws: Vec<f64> = (0..200).map(|_| backoff(1.0, 1.0, 0).as_secs_f64()).collect();
        assert!(draws.iter().any(|&d| d < 0.5) && draws.iter().any(|&d| d > 0.5));
        assert_eq!(backoff(0.0, 0.0, 3), Duration::ZERO);
        assert_eq!(backoff(f64::NAN, 1.0, 3), Duration::ZERO);
        assert!(backoff(1.0, 2.0, u32::MAX) <= Duration::from_secs(2));
    }

    #[test]
    fn vendor_messages_are_extracted() {
        let openai =
            r#"{"error":{"message":"Invalid 'max_tokens'","type":"invalid_request_error","param":null,"code":null}}"#;
        assert_eq!(
            vendor_error_message(openai).unwrap(),
            "Invalid 'max_tokens' [invalid_request_error]"
        );
        let anthropic =
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
        assert_eq!(
            vendor_error_message(anthropic).unwrap(),
            "max_tokens: Field required [invalid_request_error]"
        );
        let gemini = r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#;
        assert_eq!(
            vendor_error_message(gemini).unwrap(),
            "API key not valid. [INVALID_ARGUMENT]"
        );
        assert_eq!(
            vendor_error_message(r#"{"error":"model 'x' not found"}"#).unwrap(),
            "model 'x' not found"
        );
        assert_eq!(
            vendor_error_message(r#"{"object":"error","message":"bad"}"#).unwrap(),
            "bad"
        );
        assert_eq!(vendor_error_message("<html>Bad Gateway</html>"), None);
    }

    #[test]
    fn truncation_is_bounded_and_char_safe() {
        assert_eq!(truncate_chars("abc", 5), "abc");
        assert_eq!(truncate_chars("ééééé", 2), "éé...");
        assert_eq!(truncate_chars(&"x".repeat(10_000), 500).chars().count(), 503);
    }

    fn config() -> ProviderConfig {
        ProviderConfig {
            name: "t".into(),
            kind: crate::ProviderKind::OpenaiChat,
            base_url: "http://127.0.0.1:1".into(),
            model: "m".into(),
            api_key_env: None,
            timeout_s: 1.0,
            connect_timeout_s: 1.0,
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            max_retries: 0,
            retry_base_delay_s: 0.0,
            retry_max_delay_s: 0.0,
        }
    }

    #[test]
    fn bad_timeouts_are_config_errors_not_panics() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut c = config();
            c.timeout_s = bad;
            assert!(matches!(HttpClient::new(&c, None), Err(LlmError::Config(m)) if m.contains("timeout_s")));
        }
    }

    #[test]
    fn excerpts_are_redacted_before_being_cut() {
        let key = Secret::new("sk-secret-0123456789");
        let client = HttpClient::new(&config(), Some(key)).unwrap();
        // The key straddles the cut: redacting after cutting would leak its first half.
        let text = format!("{}sk-secret-0123456789", "a".repeat(490));
        let e = client.excerpt(&text);
        assert!(!e.contains("sk-secret"), "{e}");
    }
}
