use std::time::Duration;

/// Why a chat request failed. Every message says which provider and what to do about it, and
/// never contains an API key (see [`crate::redact`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("{provider}: the API key variable {env} is not set; export it (e.g. `export {env}=...`) or point `api_key_env` at the variable that holds your key")]
    MissingKey { provider: String, env: String },

    #[error("{provider}: the server refused the API key (HTTP {status}): {message}. Check that {env} holds a valid key for this endpoint")]
    Auth {
        provider: String,
        status: u16,
        env: String,
        message: String,
    },

    #[error("{provider}: HTTP 404 from {url}: {message}. Check the model name '{model}' and the base URL")]
    NotFound {
        provider: String,
        url: String,
        model: String,
        message: String,
    },

    #[error("{provider}: the request was rejected (HTTP {status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },

    #[error("{provider}: HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        provider: String,
        status: u16,
        attempts: u32,
        message: String,
    },

    #[error("{provider}: no answer within {:.0} s, {attempts} attempt(s); raise `timeout_s` if the model is slow", after.as_secs_f64())]
    Timeout {
        provider: String,
        attempts: u32,
        after: Duration,
    },

    #[error("{provider}: cannot reach {url} after {attempts} attempt(s): {message}. Check `base_url` and that the server is running")]
    Connect {
        provider: String,
        url: String,
        attempts: u32,
        message: String,
    },

    #[error("{provider}: the connection to {url} broke while its answer (HTTP {status}) was being read, after {attempts} attempt(s): {message}. The server was reached: look at its logs, or at a proxy between here and there")]
    Interrupted {
        provider: String,
        url: String,
        status: u16,
        attempts: u32,
        message: String,
    },

    /// A success status whose body is not JSON at all (empty, an HTML page, cut-off garbage):
    /// the endpoint or a proxy in front of it misbehaved, not the model, so it is retried like a
    /// 5xx and counts toward an outage ([`LlmError::is_transient`]).
    #[error("{provider}: {url} answered HTTP {status} with a body that is not JSON, after {attempts} attempt(s): {message}. The endpoint (or a proxy in front of it) is not answering in its API: look at its logs")]
    NotJson {
        provider: String,
        url: String,
        status: u16,
        attempts: u32,
        message: String,
    },

    /// JSON that lacks what the wire protocol promises (no choices, no content...).
    #[error("{provider}: the answer is not in the expected format: {message}")]
    MalformedResponse { provider: String, message: String },

    #[error("{0}")]
    Budget(#[from] crate::budget::BudgetExceeded),

    #[error("replay: no recorded answer for this {role} request (key {key}); the run being replayed never asked it, so the replay cannot continue past this point")]
    NoRecordedAnswer { role: String, key: String },

    #[error("configuration: {0}")]
    Config(String),
}

impl LlmError {
    /// The HTTP attempts made, where the error knows them (the ones retried with backoff).
    pub fn attempts(&self) -> Option<u32> {
        match self {
            LlmError::Http { attempts, .. }
            | LlmError::Timeout { attempts, .. }
            | LlmError::Connect { attempts, .. }
            | LlmError::Interrupted { attempts, .. }
            | LlmError::NotJson { attempts, .. } => Some(*attempts),
            _ => None,
        }
    }

    /// Whether retrying the same request may succeed: the endpoint failed (5xx, 429, a timeout,
    /// no connection, a broken or non-JSON answer), not the request. A run counts these toward
    /// its outage stop.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::Http { .. }
                | LlmError::Timeout { .. }
                | LlmError::Connect { .. }
                | LlmError::Interrupted { .. }
                | LlmError::NotJson { .. }
        )
    }

    /// Whether the endpoint refused the credentials (HTTP 401/403) or none is configured: no
    /// retry and no other request can succeed until the key is fixed, so a run should stop
    /// (resumable) rather than go on.
    pub fn is_auth(&self) -> bool {
        matches!(self, LlmError::Auth { .. } | LlmError::MissingKey { .. })
    }
}
