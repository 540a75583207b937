//! The wire protocols, one file each, all over the shared machinery of [`crate::http`].

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;

use crate::http::HttpClient;
use crate::{ChatModel, ChatRequest, LlmError, Message, ProviderConfig, ProviderKind, Role, Secret};
use serde_json::Value;

/// Makes the chat model `config` describes, reading its key from `config.api_key_env`.
pub fn build(config: &ProviderConfig) -> Result<Box<dyn ChatModel>, LlmError> {
    let key = match &config.api_key_env {
        Some(env) => Some(Secret::from_env(env).ok_or_else(|| LlmError::MissingKey {
            provider: config.name.clone(),
            env: env.clone(),
        })?),
        None => None,
    };
    build_with_key(config, key)
}

/// Makes the chat model `config` describes with the given key (`None`: send none).
pub fn build_with_key(config: &ProviderConfig, key: Option<Secret>) -> Result<Box<dyn ChatModel>, LlmError> {
    let http = HttpClient::new(config, key)?;
    Ok(match config.kind {
        ProviderKind::OpenaiChat => Box::new(openai_chat::OpenaiChat::new(http)),
        ProviderKind::OpenaiResponses => Box::new(openai_responses::OpenaiResponses::new(http)),
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic::new(http)),
        ProviderKind::Gemini => Box::new(gemini::Gemini::new(http)),
    })
}

/// The settings of one request: the request's own, else the provider's.
struct Settings {
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    reasoning_effort: Option<String>,
}

impl Settings {
    fn of(config: &ProviderConfig, request: &ChatRequest) -> Settings {
        Settings {
            max_tokens: request.max_tokens.or(config.max_tokens),
            temperature: request.temperature.or(config.temperature),
            reasoning_effort: request
                .reasoning_effort
                .clone()
                .or_else(|| config.reasoning_effort.clone()),
        }
    }
}

/// What each wire protocol's parser extracts from an answer: text, finish reason, usage and
/// the answering model.
type Parsed = (String, crate::FinishReason, crate::Usage, String);

/// Posts `body` and assembles the answer: the part every wire protocol shares.
async fn exchange(
    http: &crate::http::HttpClient,
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
    parse: impl FnOnce(&Value) -> Result<Parsed, LlmError>,
) -> Result<crate::ChatResponse, LlmError> {
    let reply = http.post_json(url, headers, body).await?;
    let (text, finish_reason, usage, model) = parse(&reply.body)?;
    Ok(crate::ChatResponse {
        text,
        finish_reason,
        usage,
        model,
        latency: reply.latency,
        attempts: reply.attempts,
    })
}

/// `Authorization: Bearer KEY` when a key is configured (OpenAI-compatible servers).
fn bearer(http: &crate::http::HttpClient) -> Vec<(&'static str, String)> {
    match http.key() {
        Some(k) => vec![("authorization", format!("Bearer {}", k.expose()))],
        None => vec![],
    }
}

fn describe(config: &ProviderConfig) -> String {
    format!("{} ({})", config.name, config.model)
}

/// `base` and `path` joined with exactly one slash.
fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

/// A temperature as JSON with the digits it was written with (0.2, not 0.20000000298...).
fn temperature_json(t: f32) -> Value {
    t.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// The system messages, joined by blank lines; `None` when there are none.
fn system_text(messages: &[Message]) -> Option<String> {
    let parts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The token budget for hidden reasoning (Anthropic extended thinking, Gemini thinking) that
/// stands for a reasoning effort.
fn thinking_budget(provider: &str, effort: &str) -> Result<u32, LlmError> {
    Ok(match effort {
        "minimal" => 1024,
        "low" => 2048,
        "medium" => 8192,
        "high" => 24576,
        other => {
            return Err(LlmError::Config(format!(
                "{provider}: reasoning effort '{other}' is not one of minimal, low, medium, high"
            )))
        }
    })
}

/// An output limit that leaves room for the answer after `budget` tokens of thinking: `max`
/// when it is above the budget, else the budget plus `max`.
fn room_after_thinking(max: u32, budget: u32) -> u32 {
    if max > budget {
        max
    } else {
        budget.saturating_add(max.max(1))
    }
}

/// A count at a JSON pointer, 0 when absent or not a number.
fn count(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The model the vendor says answered, else the one asked for.
fn answering_model(v: &Value, field: &str, config: &ProviderConfig) -> String {
    v.get(field)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(&config.model)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temperatures_keep_their_digits() {
        assert_eq!(temperature_json(0.2).to_string(), "0.2");
        assert_eq!(temperature_json(1.0).to_string(), "1.0");
    }

    #[test]
    fn thinking_leaves_room_for_the_answer() {
        assert_eq!(room_after_thinking(32000, 8192), 32000);
        assert_eq!(room_after_thinking(8192, 8192), 16384);
        assert_eq!(room_after_thinking(0, 2048), 2049);
        assert_eq!(thinking_budget("p", "high").unwrap(), 24576);
        assert!(thinking_budget("p", "extreme").is_err());
    }

    #[test]
    fn system_messages_are_joined() {
        let m = [Message::system("a"), Message::user("u"), Message::system("b")];
        assert_eq!(system_text(&m).as_deref(), Some("a\n\nb"));
        assert_eq!(system_text(&[Message::user("u")]), None);
    }

    #[test]
    fn missing_key_names_the_variable() {
        let config = ProviderConfig {
            name: "p".into(),
            kind: ProviderKind::Anthropic,
            base_url: "http://127.0.0.1:1".into(),
            model: "m".into(),
            api_key_env: Some("KSEARCH_TEST_KEY_THAT_IS_NEVER_SET_4711".into()),
            timeout_s: 1.0,
            connect_timeout_s: 1.0,
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            max_retries: 0,
            retry_base_delay_s: 0.0,
            retry_max_delay_s: 0.0,
        };
        match build(&config) {
            Err(LlmError::MissingKey { env, .. }) => assert_eq!(env, "KSEARCH_TEST_KEY_THAT_IS_NEVER_SET_4711"),
            Err(e) => panic!("wrong error {e}"),
            Ok(_) => panic!("built without its key"),
        }
        let mut keyless = config;
        keyless.api_key_env = None;
        assert_eq!(build(&keyless).unwrap().describe(), "p (m)");
    }
}
