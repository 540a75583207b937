//! Content-addressed answers: the key of a request is a hash of what determines the answer
//! (wire protocol, model, messages and settings), so a cache hit skips the network and a
//! recorded run can be replayed request by request.

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, ProviderKind};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The content key of a request to `model` over `kind`: 64 hex digits.
pub fn request_key(kind: ProviderKind, model: &str, request: &ChatRequest) -> String {
    let canonical = serde_json::json!({ "kind": kind.as_str(), "model": model, "request": request });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Somewhere answers are kept by request key.
pub trait ResponseCache: Send + Sync {
    /// The answer kept under `key` ([`request_key`]), if any.
    fn get(&self, key: &str) -> Option<ChatResponse>;
    /// Keeps `response` under `key`, replacing what was there.
    fn put(&self, key: &str, response: &ChatResponse);
}

/// A cache that lives as long as the process.
#[derive(Default)]
pub struct MemoryCache {
    map: Mutex<HashMap<String, ChatResponse>>,
}

impl ResponseCache for MemoryCache {
    fn get(&self, key: &str) -> Option<ChatResponse> {
        self.map.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: &str, response: &ChatResponse) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(key.to_string(), response.clone());
        }
    }
}

/// Answers only from recorded exchanges; anything else is an error naming the request.
pub struct ReplayModel {
    role: String,
    kind: ProviderKind,
    model: String,
    answers: Arc<dyn ResponseCache>,
}

impl ReplayModel {
    /// Replays answers recorded for `model` over `kind`, serving the `role` (planner, coder).
    pub fn new(role: &str, kind: ProviderKind, model: &str, answers: Arc<dyn ResponseCache>) -> ReplayModel {
        ReplayModel {
            role: role.to_string(),
            kind,
            model: model.to_string(),
            answers,
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for ReplayModel {
    fn describe(&self) -> String {
        format!("replay of {} ({})", self.model, self.kind.as_str())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = request_key(self.kind, &self.model, request);
        self.answers.get(&key).ok_or(LlmError::NoRecordedAnswer {
            role: self.role.clone(),
            key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FinishReason, Message, Usage};
    use std::time::Duration;

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            text: text.into(),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            model: "m".into(),
            latency: Duration::from_millis(5),
            attempts: 1,
        }
    }

    #[test]
    fn keys_depend_on_everything_that_shapes_the_answer() {
        let r = ChatRequest {
            messages: vec![Message::user("hi")],
            ..Default::default()
        };
        let k = request_key(ProviderKind::OpenaiChat, "m", &r);
        assert_eq!(k.len(), 64);
        assert_eq!(k, request_key(ProviderKind::OpenaiChat, "m", &r.clone()));
        assert_ne!(k, request_key(ProviderKind::Anthropic, "m", &r));
        assert_ne!(k, request_key(ProviderKind::OpenaiChat, "m2", &r));
        let hotter = ChatRequest {
            temperature: Some(0.7),
            ..r.clone()
        };
        assert_ne!(k, request_key(ProviderKind::OpenaiChat, "m", &hotter));
    }

    #[tokio::test]
    async fn replay_answers_recorded_requests_and_names_the_missing_one() {
        let cache = Arc::new(MemoryCache::default());
        let asked = ChatRequest {
            messages: vec![Message::user("one")],
            ..Default::default()
        };
        cache.put(&request_key(ProviderKind::Gemini, "g", &asked), &answer("recorded"));
        let replay = ReplayModel::new("planner", ProviderKind::Gemini, "g", cache);
        assert_eq!(replay.complete(&asked).await.unwrap().text, "recorded");
        let other = ChatRequest {
            messages: vec![Message::user("two")],
            ..Default::default()
        };
        let e = replay.complete(&other).await.unwrap_err();
        assert!(matches!(e, LlmError::NoRecordedAnswer { .. }));
        assert!(e.to_string().contains("planner request"), "{e}");
    }
}
