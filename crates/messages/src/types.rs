//! What goes in and out of a chat model, independent of any vendor's wire format.

use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
/// Who speaks a [`Message`]; serialized lowercase (`system`, `user`, `assistant`).
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The standing instructions (Anthropic and Gemini take them apart from the turns).
    System,
    /// ksearch's side: the prompt, feedback, a retry instruction.
    User,
    /// The model's side: an earlier answer, kept in the conversation.
    Assistant,
}

/// One turn of a chat conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who says it.
    pub role: Role,
    /// The text of the turn, as sent (plain text or Markdown; no images).
    pub content: String,
}

impl Message {
    /// A [`Role::System`] message.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: Role::System,
            content: content.into(),
        }
    }
    /// A [`Role::User`] message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
        }
    }
    /// A [`Role::Assistant`] message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// One request to a chat model. Settings left `None` take the provider's configured value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far, in order; the last one is usually the user's.
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The output-token limit for the answer.
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Sampling temperature; a provider leaves it out where the model refuses one (e.g.
    /// Anthropic with extended thinking).
    pub temperature: Option<f32>,
    /// `low`, `medium` or `high`, for reasoning models (OpenAI Responses API; Anthropic's and
    /// Gemini's thinking budgets are derived from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
}

/// Why the model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It hit the output-token limit: the answer is truncated.
    Length,
    /// The vendor's safety filter stopped it.
    ContentFilter,
    /// Anything else, as the vendor named it.
    Other(String),
}

/// Token counts as the vendor reported them (zero where it reports nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Completion tokens, reasoning ones included.
    pub output_tokens: u64,
    /// Prompt tokens served from the vendor's prompt cache (billed at a lower rate).
    pub cached_input_tokens: u64,
    /// Output tokens spent on hidden reasoning.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Input plus output tokens (cached and reasoning ones are already inside those two).
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// A model's answer to one [`ChatRequest`], after any retries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The answer's text: what [`crate::extract`] reads.
    pub text: String,
    /// Why the model stopped; [`FinishReason::Length`] means `text` is cut off.
    pub finish_reason: FinishReason,
    /// Tokens as the vendor counted them.
    pub usage: Usage,
    /// The model that answered, as the vendor reports it (may be more specific than asked).
    pub model: String,
    /// Wall time of the successful attempt plus every retry and wait before it.
    #[serde(with = "duration_secs")]
    pub latency: Duration,
    /// HTTP attempts made, 1 when the first one succeeded.
    pub attempts: u32,
}

impl ChatResponse {
    /// Whether the answer hit the output-token limit ([`FinishReason::Length`]).
    pub fn truncated(&self) -> bool {
        self.finish_reason == FinishReason::Length
    }
}

mod duration_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Ok(Duration::try_from_secs_f64(secs).unwrap_or_default())
    }
}
