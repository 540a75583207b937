//! Gemini API: `POST {base_url}/models/{model}:generateContent`.

use super::{
    answering_model, count, join_url, room_after_thinking, system_text, temperature_json, thinking_budget, Settings,
};
use crate::http::HttpClient;
use crate::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Role, Usage};
use serde_json::{json, Map, Value};

pub struct Gemini {
    http: HttpClient,
}

impl Gemini {
    pub fn new(http: HttpClient) -> Self {
        Gemini { http }
    }

    fn url(&self) -> String {
        let config = self.http.config();
        let model = config.model.strip_prefix("models/").unwrap_or(&config.model);
        join_url(&config.base_url, &format!("models/{model}:generateContent"))
    }

    fn body(&self, request: &ChatRequest) -> Result<Value, LlmError> {
        let config = self.http.config();
        let settings = Settings::of(config, request);
        let contents: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| {
                let role = match m.role {
                    Role::System => return None,
                    Role::User => "user",
                    Role::Assistant => "model",
                };
                Some(json!({ "role": role, "parts": [{ "text": m.content }] }))
            })
            .collect();
        let mut body = Map::new();
        if let Some(system) = system_text(&request.messages) {
            body.insert("systemInstruction".into(), json!({ "parts": [{ "text": system }] }));
        }
        body.insert("contents".into(), Value::Array(contents));
        let mut generation = Map::new();
        let mut max_tokens = settings.max_tokens;
        if let Some(effort) = &settings.reasoning_effort {
            let budget = thinking_budget(&config.name, effort)?;
            // Thinking tokens count against maxOutputTokens: leave room for the answer.
            max_tokens = max_tokens.map(|m| room_after_thinking(m, budget));
            generation.insert("thinkingConfig".into(), json!({ "thinkingBudget": budget }));
        }
        if let Some(max) = max_tokens {
            generation.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(t) = settings.temperature {
            generation.insert("temperature".into(), temperature_json(t));
        }
        if !generation.is_empty() {
            body.insert("generationConfig".into(), Value::Object(generation));
        }
        Ok(Value::Object(body))
    }

    fn parse(&self, v: &Value) -> Result<(String, FinishReason, Usage, String), LlmError> {
        let config = self.http.config();
        let usage = Usage {
            input_tokens: count(v, "/usageMetadata/promptTokenCount"),
            output_tokens: count(v, "/usageMetadata/candidatesTokenCount")
                + count(v, "/usageMetadata/thoughtsTokenCount"),
            cached_input_tokens: count(v, "/usageMetadata/cachedContentTokenCount"),
            reasoning_tokens: count(v, "/usageMetadata/thoughtsTokenCount"),
        };
        let model = answering_model(v, "modelVersion", config);
        let candidate = match v.get("candidates").and_then(Value::as_array).and_then(|c| c.first()) {
            Some(c) => c,
            None => {
                // A blocked prompt gets no candidates, only the reason.
                if v.pointer("/promptFeedback/blockReason").is_some() {
                    return Ok((String::new(), FinishReason::ContentFilter, usage, model));
                }
                return Err(self.http.malformed("no candidates[0] in the answer", v));
            }
        };
        let text: String = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        let finish = match candidate.get("finishReason").and_then(Value::as_str) {
            Some("STOP") => FinishReason::Stop,
            Some("MAX_TOKENS") => FinishReason::Length,
            Some(
                "SAFETY"
                | "RECITATION"
                | "BLOCKLIST"
                | "PROHIBITED_CONTENT"
                | "SPII"
                | "IMAGE_SAFETY"
                | "IMAGE_PROHIBITED_CONTENT"
                | "IMAGE_RECITATION",
            ) => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_string()),
            None => FinishReason::Other("none".to_string()),
        };
        Ok((text, finish, usage, model))
    }
}

#[async_trait::async_trait]
impl ChatModel for Gemini {
    fn describe(&self) -> String {
        super::describe(self.http.config())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let headers: Vec<(&str, String)> = match self.http.key() {
            Some(k) => vec![("x-goog-api-key", k.expose().to_string())],
            None => vec![],
        };
        let body = self.body(request)?;
        super::exchange(&self.http, &self.url(), &headers, &body, |v| self.parse(v)).await
    }
}
