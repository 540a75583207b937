//! The client a search talks to: one role's model, with the response cache in front of it and
//! the budget and price table behind it. Cache hits cost nothing and skip the network; every
//! real call is checked against the budget first and accounted after.

use crate::budget::Budget;
use crate::cache::{request_key, ResponseCache};
use crate::prices::PriceTable;
use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, ProviderConfig};
use std::sync::{Arc, Mutex};

/// An answer with its accounting.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The model's answer (the cached one on a hit).
    pub response: ChatResponse,
    /// Content key of the request, under which it is cached and recorded.
    pub key: String,
    /// `None` when the model's price is unknown.
    pub cost_dollars: Option<f64>,
    /// The answer came from the response cache: no call was made, and it cost nothing.
    pub from_cache: bool,
}

/// One role's model with the response cache in front and the run's budget and prices behind.
pub struct LlmClient {
    role: String,
    config: ProviderConfig,
    model: Arc<dyn ChatModel>,
    prices: Arc<PriceTable>,
    budget: Arc<Mutex<Budget>>,
    cache: Option<Arc<dyn ResponseCache>>,
}

impl LlmClient {
    /// `budget` is shared by all roles of a run, so limits apply to the run as a whole.
    pub fn new(
        role: &str,
        config: ProviderConfig,
        model: Arc<dyn ChatModel>,
        prices: Arc<PriceTable>,
        budget: Arc<Mutex<Budget>>,
        cache: Option<Arc<dyn ResponseCache>>,
    ) -> LlmClient {
        LlmClient {
            role: role.to_string(),
            config,
            model,
            prices,
            budget,
            cache,
        }
    }

    /// The role it serves, `planner` or `coder`.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// The provider configuration of its model.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// `provider-name (model)`: see [`ChatModel::describe`].
    pub fn describe(&self) -> String {
        self.model.describe()
    }

    /// The key a request would be cached and recorded under.
    pub fn key(&self, request: &ChatRequest) -> String {
        request_key(self.config.kind, &self.config.model, request)
    }

    /// The cached answer if there is one; else checks the budget, calls the model, prices and
    /// accounts the call, and caches the answer.
    pub async fn complete(&self, request: &ChatRequest) -> Result<Completion, LlmError> {
        let key = self.key(request);
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get(&key)) {
            return Ok(Completion {
                response: hit,
                key,
                cost_dollars: Some(0.0),
                from_cache: true,
            });
        }
        self.lock_budget()?.check()?;
        let response = self.model.complete(request).await?;
        // Price by the configured name first: vendors answer with dated snapshot names.
        let cost = self
            .prices
            .cost(&self.config.model, &response.usage)
            .or_else(|| self.prices.cost(&response.model, &response.usage));
        self.lock_budget()?.record(&response.usage, cost);
        if let Some(cache) = &self.cache {
            cache.put(&key, &response);
        }
        Ok(Completion {
            response,
            key,
            cost_dollars: cost,
            from_cache: false,
        })
    }

    fn lock_budget(&self) -> Result<std::sync::MutexGuard<'_, Budget>, LlmError> {
        // A poisoned lock means another role panicked mid-update; its numbers are still the best we have.
        Ok(self.budget.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::BudgetLimits;
    use crate::cache::MemoryCache;
    use crate::config::LlmConfig;
    use crate::{FinishReason, Message, Usage};
    use indexmap::IndexMap;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    struct Counting {
        calls: AtomicU32,
    }

    #[async_trait::async_trait]
    impl ChatModel for Counting {
        fn describe(&self) -> String {
            "counting".into()
        }
        async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(ChatResponse {
                text: format!("answer {n} to {}", request.messages.len()),
                finish_reason: FinishReason::Stop,
                usage: Usage {
                    input_tokens: 1000,
                    output_tokens: 500,
                    ..Usage::default()
                },
                model: "gpt-5-2025-08-07".into(),
                latency: Duration::from_millis(1),
                attempts: 1,
            })
        }
    }

    fn client(limits: BudgetLimits, cache: bool) -> (LlmClient, Arc<Counting>) {
        let model = Arc::new(Counting {
            calls: AtomicU32::new(0),
        });
        let config = LlmConfig::default().resolve("openai:gpt-5").unwrap();
        let cache: Option<Arc<dyn ResponseCache>> = if cache {
            Some(Arc::new(MemoryCache::default()))
        } else {
            None
        };
        let c = LlmClient::new(
            "coder",
            config,
            model.clone(),
            Arc::new(PriceTable::new(&IndexMap::new())),
            Arc::new(Mutex::new(Budget::new(limits))),
            cache,
        );
        (c, model)
    }

    fn ask(text: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::user(text)],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn cache_hits_skip_the_model_and_cost_nothing() {
        let (c, model) = client(BudgetLimits::default(), true);
        let first = c.complete(&ask("a")).await.unwrap();
        assert!(!first.from_cache);
        let cost = first.cost_dollars.unwrap();
        assert!((cost - (1000.0 * 1.25 + 500.0 * 10.0) / 1e6).abs() < 1e-12, "{cost}");
        let again = c.complete(&ask("a")).await.unwrap();
        assert!(again.from_cache);
        assert_eq!(again.response.text, first.response.text);
        assert_eq!(model.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn budget_stops_before_the_call_that_would_exceed_it() {
        let (c, model) = client(
            BudgetLimits {
                max_calls: Some(2),
                ..Default::default()
            },
            false,
        );
        c.complete(&ask("a")).await.unwrap();
        c.complete(&ask("b")).await.unwrap();
        let e = c.complete(&ask("c")).await.unwrap_err();
        assert!(matches!(e, LlmError::Budget(_)), "{e}");
        assert_eq!(
            model.calls.load(Ordering::SeqCst),
            2,
            "the refused call never reached the model"
        );
    }
}
