//! LLM providers for ksearch. Knows nothing about kernels: messages in; text, finish reason and
//! usage out.
//!
//! - [`ChatModel`] is the one trait every provider implements; [`providers::build`] makes one
//!   from a [`ProviderConfig`] (OpenAI-compatible chat completions, OpenAI Responses,
//!   Anthropic Messages, Gemini generateContent).
//! - Reliability lives in [`http`]: connect/read timeouts, retries with exponential backoff and
//!   jitter on 429, 5xx and timeouts (honouring Retry-After), and precise errors on 4xx.
//! - [`config`] reads `ksearch.toml` (project, then user level) and `--llm PROVIDER:MODEL`.
//! - [`prices`] and [`budget`] turn usage into dollars and stop a run when a budget is spent.
//! - [`LlmClient`] puts the cache in front of a model and the budget behind it.
//! - [`cache`] keys requests by content, for the response cache and for replaying a run.
//! - [`extract`] pulls structured answers (JSON, multi-file code) out of free-form text (from
//!   ksearch-messages, re-exported, as are the message types).
//! - Keys come from the environment only and never appear in messages ([`redact`]).

#![warn(missing_docs)]

pub mod budget;
pub mod cache;
mod client;
pub mod config;
mod error;
pub mod http;
pub mod prices;
pub mod providers;
mod redact;

pub use client::{Completion, LlmClient};
pub use config::{LlmConfig, ProviderConfig, ProviderKind};
pub use error::LlmError;
pub use redact::{redact, Secret};
// The message types and answer extraction live in ksearch-messages (no network code), so the
// engine can use them without this crate; they are re-exported here for the providers' users.
pub use ksearch_messages::extract;
pub use ksearch_messages::{ChatRequest, ChatResponse, FinishReason, Message, Role, Usage};

/// A chat model behind some wire protocol.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// `provider-name (model)`, for messages and records.
    fn describe(&self) -> String;

    /// Sends one request, retrying transient failures, and returns the answer.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}
