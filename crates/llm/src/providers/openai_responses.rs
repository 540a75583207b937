//! OpenAI Responses API: `POST {base_url}/responses`, for reasoning models.

use super::{answering_model, count, join_url, system_text, temperature_json, Settings};
use crate::http::HttpClient;
use crate::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, Role, Usage};
use serde_json::{json, Map, Value};

pub struct OpenaiResponses {
    http: HttpClient,
}

impl OpenaiResponses {
    pub fn new(http: HttpClient) -> Self {
        OpenaiResponses { http }
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let config = self.http.config();
        let settings = Settings::of(config, request);
        let input: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| match m.role {
                Role::System => None,
                Role::User => Some(json!({ "role": "user", "content": m.content })),
                Role::Assistant => Some(json!({ "role": "assistant", "content": m.content })),
            })
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), json!(config.model));
        if let Some(system) = system_text(&request.messages) {
            body.insert("instructions".into(), json!(system));
        }
        body.insert("input".into(), Value::Array(input));
        if let Some(max) = settings.max_tokens {
            body.insert("max_output_tokens".into(), json!(max));
        }
        if let Some(effort) = settings.reasoning_effort {
            body.insert("reasoning".into(), json!({ "effort": effort }));
        }
        if let Some(t) = settings.temperature {
            body.insert("temperature".into(), temperature_json(t));
        }
        Value::Object(body)
    }

    fn parse(&self, v: &Value) -> Result<(String, FinishReason, Usage, String), LlmError> {
        let config = self.http.config();
        let output = v
            .get("output")
            .and_then(Value::as_array)
            .ok_or_else(|| self.http.malformed("no output[] in the answer", v))?;
        let mut text = String::new();
        for item in output
            .iter()
            .filter(|i| i.get("type").and_then(Value::as_str) == Some("message"))
        {
            for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                }
            }
        }
        let reason = v.pointer("/incomplete_details/reason").and_then(Value::as_str);
        let finish = match v.get("status").and_then(Value::as_str) {
            Some("completed") => FinishReason::Stop,
            Some("incomplete") => match reason {
                Some("max_output_tokens") => FinishReason::Length,
                Some("content_filter") => FinishReason::ContentFilter,
                Some(other) => FinishReason::Other(format!("incomplete: {other}")),
                None => FinishReason::Other("incomplete".to_string()),
            },
            Some("failed") => {
                let why = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                return Err(LlmError::MalformedResponse {
                    provider: config.name.clone(),
                    message: format!("the response failed: {}", self.http.excerpt(why)),
                });
            }
            // Some compatible servers leave the status out of a finished response.
            None => FinishReason::Stop,
            Some(other) => FinishReason::Other(other.to_string()),
        };
        let usage = Usage {
            input_tokens: count(v, "/usage/input_tokens"),
            output_tokens: count(v, "/usage/output_tokens"),
            cached_input_tokens: count(v, "/usage/input_tokens_details/cached_tokens"),
            reasoning_tokens: count(v, "/usage/output_tokens_details/reasoning_tokens"),
        };
        Ok((text, finish, usage, answering_model(v, "model", config)))
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenaiResponses {
    fn describe(&self) -> String {
        super::describe(self.http.config())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let config = self.http.config();
        let url = join_url(&config.base_url, "responses");
        let headers = super::bearer(&self.http);
        super::exchange(&self.http, &url, &headers, &self.body(request), |v| self.parse(v)).await
    }
}
