use std::time::Duration;

/// Why a chat request failed. Every message says which provider and what to do about it, and
/// never contains an API key (see [`crate::redact`]).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    /// The provider needs a key and its environment variable is unset or empty.
    #[error("{provider}: the API key variable {env} is not set; export it (e.g. `export {env}=...`) or point `api_key_env` at the variable that holds your key")]
    MissingKey {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The environment variable the key is read from (`api_key_env`).
        env: String,
    },

    /// HTTP 401 or 403: the server refused the key. Not retried.
    #[error("{provider}: the server refused the API key (HTTP {status}): {message}. Check that {env} holds a valid key for this endpoint")]
    Auth {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The HTTP status of the answer.
        status: u16,
        /// The environment variable the key was read from, or a phrase saying none is configured.
        env: String,
        /// The server's error message, keys redacted.
        message: String,
    },

    /// HTTP 404: usually a wrong model name or base URL. Not retried.
    #[error("{provider}: HTTP 404 from {url}: {message}. Check the model name '{model}' and the base URL")]
    NotFound {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The URL the request went to.
        url: String,
        /// The model asked for.
        model: String,
        /// The server's error message, keys redacted.
        message: String,
    },

    /// Another 4xx: the server rejected the request itself (too long a prompt, a bad setting). Not retried.
    #[error("{provider}: the request was rejected (HTTP {status}): {message}")]
    BadRequest {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The HTTP status of the answer.
        status: u16,
        /// The server's error message, keys redacted.
        message: String,
    },

    /// Any other failure status: 429 and 5xx once the retries are spent.
    #[error("{provider}: HTTP {status} after {attempts} attempt(s): {message}")]
    Http {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The HTTP status of the answer.
        status: u16,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// The server's error message, keys redacted.
        message: String,
    },

    /// No answer within the read timeout on the last attempt, after the retries were spent.
    #[error("{provider}: no answer within {:.0} s, {attempts} attempt(s); raise `timeout_s` if the model is slow", after.as_secs_f64())]
    Timeout {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// How long the last attempt waited for an answer (the read timeout).
        after: Duration,
    },

    /// The server could not be reached (DNS, refused connection, TLS) on the last attempt.
    #[error("{provider}: cannot reach {url} after {attempts} attempt(s): {message}. Check `base_url` and that the server is running")]
    Connect {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The URL the request went to.
        url: String,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// The transport's error, keys redacted.
        message: String,
    },

    /// The server answered, but the connection broke while the body was being read.
    #[error("{provider}: the connection to {url} broke while its answer (HTTP {status}) was being read, after {attempts} attempt(s): {message}. The server was reached: look at its logs, or at a proxy between here and there")]
    Interrupted {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The URL the request went to.
        url: String,
        /// The HTTP status of the answer.
        status: u16,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// The transport's error while reading, keys redacted.
        message: String,
    },

    /// A success status whose body is not JSON at all (empty, an HTML page, cut-off garbage):
    /// the endpoint or a proxy in front of it misbehaved, not the model, so it is retried like a
    /// 5xx and counts toward an outage ([`LlmError::is_transient`]).
    #[error("{provider}: {url} answered HTTP {status} with a body that is not JSON, after {attempts} attempt(s): {message}. The endpoint (or a proxy in front of it) is not answering in its API: look at its logs")]
    NotJson {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// The URL the request went to.
        url: String,
        /// The HTTP status of the answer.
        status: u16,
        /// HTTP attempts made, retries included.
        attempts: u32,
        /// What was wrong with the body, with its start, keys redacted.
        message: String,
    },

    /// JSON that lacks what the wire protocol promises (no choices, no content...).
    #[error("{provider}: the answer is not in the expected format: {message}")]
    MalformedResponse {
        /// The provider's name in the configuration (`openai`, `gpu-box`).
        provider: String,
        /// What is missing or wrong in the answer.
        message: String,
    },

    /// The run's budget is spent; the call was not made.
    #[error("{0}")]
    Budget(#[from] crate::budget::BudgetExceeded),

    /// Replay mode: the run being replayed has no answer for this request.
    #[error("replay: no recorded answer for this {role} request (key {key}); the run being replayed never asked it, so the replay cannot continue past this point")]
    NoRecordedAnswer {
        /// The brain's role of the request (`planner`, `coder`).
        role: String,
        /// The request's content key ([`crate::cache::request_key`]).
        key: String,
    },

    /// The configuration is unusable (unknown provider, a bad value); the message says which.
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
