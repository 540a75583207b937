//! Anthropic Messages API: `POST {base_url}/v1/messages`.

use super::{
    answering_model, count, join_url, room_after_thinking, system_text, temperature_json, thinking_budget, Settings,
};
use crate::http::HttpClient;
use crate::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Role, Usage};
use serde_json::{json, Map, Value};

const API_VERSION: &str = "2023-06-01";

/// `max_tokens` is required by the API; this is sent when nothing is configured.
const DEFAULT_MAX_TOKENS: u32 = 8192;

pub struct Anthropic {
    http: HttpClient,
}

impl Anthropic {
    pub fn new(http: HttpClient) -> Self {
        Anthropic { http }
    }

    fn body(&self, request: &ChatRequest) -> Result<Value, LlmError> {
        let config = self.http.config();
        let settings = Settings::of(config, request);
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| match m.role {
                Role::System => None,
                Role::User => Some(json!({ "role": "user", "content": m.content })),
                Role::Assistant => Some(json!({ "role": "assistant", "content": m.content })),
            })
            .collect();
        let mut max_tokens = settings.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let mut body = Map::new();
        body.insert("model".into(), json!(config.model));
        if let Some(system) = system_text(&request.messages) {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(messages));
        let thinking = match &settings.reasoning_effort {
            Some(effort) => {
                let budget = thinking_budget(&config.name, effort)?;
                max_tokens = room_after_thinking(max_tokens, budget);
                Some(json!({ "type": "enabled", "budget_tokens": budget }))
            }
            None => None,
        };
        body.insert("max_tokens".into(), json!(max_tokens));
        match thinking {
            // The API rejects a temperature other than 1 with extended thinking, so none is sent.
            Some(thinking) => {
                body.insert("thinking".into(), thinking);
            }
            None => {
                if let Some(t) = settings.temperature {
                    body.insert("temperature".into(), temperature_json(t));
                }
            }
        }
        Ok(Value::Object(body))
    }

    fn parse(&self, v: &Value) -> Result<(String, FinishReason, Usage, String), LlmError> {
        let config = self.http.config();
        let content = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| self.http.malformed("no content[] in the answer", v))?;
        let text: String = content
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        let finish = match v.get("stop_reason").and_then(Value::as_str) {
            Some("end_turn") | Some("stop_sequence") => FinishReason::Stop,
            Some("max_tokens") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("none".to_string()),
        };
        let cache_read = count(v, "/usage/cache_read_input_tokens");
        let usage = Usage {
            input_tokens: count(v, "/usage/input_tokens") + cache_read + count(v, "/usage/cache_creation_input_tokens"),
            output_tokens: count(v, "/usage/output_tokens"),
            cached_input_tokens: cache_read,
            // Thinking tokens are inside output_tokens; the API does not report them apart.
            reasoning_tokens: 0,
        };
        Ok((text, finish, usage, answering_model(v, "model", config)))
    }
}

#[async_trait::async_trait]
impl ChatModel for Anthropic {
    fn describe(&self) -> String {
        super::describe(self.http.config())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let config = self.http.config();
        let url = join_url(&config.base_url, "v1/messages");
        let mut headers: Vec<(&str, String)> = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(k) = self.http.key() {
            headers.push(("x-api-key", k.expose().to_string()));
        }
        let body = self.body(request)?;
        super::exchange(&self.http, &url, &headers, &body, |v| self.parse(v)).await
    }
}
