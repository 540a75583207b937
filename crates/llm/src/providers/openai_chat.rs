//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions` (OpenAI, vLLM,
//! llama.cpp, Ollama, LM Studio, OpenRouter, ...).

use super::{answering_model, count, join_url, temperature_json, Settings};
use crate::http::HttpClient;
use crate::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Role, Usage};
use serde_json::{json, Map, Value};

pub struct OpenaiChat {
    http: HttpClient,
}

impl OpenaiChat {
    pub fn new(http: HttpClient) -> Self {
        OpenaiChat { http }
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let config = self.http.config();
        let settings = Settings::of(config, request);
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| json!({ "role": role(m.role), "content": m.content }))
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), json!(config.model));
        body.insert("messages".into(), Value::Array(messages));
        if let Some(max) = settings.max_tokens {
            // OpenAI's reasoning models reject `max_tokens`; compatible servers may not know
            // `max_completion_tokens`.
            let field = if is_openai_host(&config.base_url) {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(field.into(), json!(max));
        }
        if let Some(t) = settings.temperature {
            body.insert("temperature".into(), temperature_json(t));
        }
        if let Some(effort) = settings.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        Value::Object(body)
    }

    fn parse(&self, v: &Value) -> Result<(String, FinishReason, Usage, String), LlmError> {
        let config = self.http.config();
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| self.http.malformed("no choices[0] in the answer", v))?;
        let message = choice
            .get("message")
            .ok_or_else(|| self.http.malformed("choices[0] has no message", v))?;
        let text = match message.get("content") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            // Some compatible servers answer with a list of content parts.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            Some(_) => return Err(self.http.malformed("choices[0].message.content is not text", v)),
        };
        let finish = match choice.get("finish_reason").and_then(Value::as_str) {
            Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("none".to_string()),
        };
        let usage = Usage {
            input_tokens: count(v, "/usage/prompt_tokens"),
            output_tokens: count(v, "/usage/completion_tokens"),
            cached_input_tokens: count(v, "/usage/prompt_tokens_details/cached_tokens"),
            reasoning_tokens: count(v, "/usage/completion_tokens_details/reasoning_tokens"),
        };
        Ok((text, finish, usage, answering_model(v, "model", config)))
    }
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    }
}

/// Whether `base_url` is OpenAI's own API (not a compatible server).
fn is_openai_host(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or("");
    host.eq_ignore_ascii_case("api.openai.com")
}

#[async_trait::async_trait]
impl ChatModel for OpenaiChat {
    fn describe(&self) -> String {
        super::describe(self.http.config())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let config = self.http.config();
        let url = join_url(&config.base_url, "chat/completions");
        let headers = super::bearer(&self.http);
        super::exchange(&self.http, &url, &headers, &self.body(request), |v| self.parse(v)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_host_is_recognised() {
        assert!(is_openai_host("https://api.openai.com/v1"));
        assert!(is_openai_host("https://API.openai.com:443/v1"));
        assert!(!is_openai_host("http://localhost:8000/v1"));
        assert!(!is_openai_host("https://openrouter.ai/api/v1"));
        assert!(!is_openai_host("https://api.openai.com.evil.example/v1"));
    }
}
