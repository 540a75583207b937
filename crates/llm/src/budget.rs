//! Budgets on LLM calls, tokens and dollars. The check happens before each call, so a run
//! stops cleanly at the limit with its state saved, never halfway through an answer.

use crate::Usage;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimits {
    pub max_calls: Option<u64>,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    pub max_dollars: Option<f64>,
}

/// What has been spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub reasoning_tokens: u64,
    pub dollars: f64,
    /// Calls whose model had no known price (their cost is not in `dollars`).
    pub unpriced_calls: u64,
}

impl Spent {
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, usage: &Usage, dollars: Option<f64>) {
        self.calls += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cached_input_tokens += usage.cached_input_tokens;
        self.reasoning_tokens += usage.reasoning_tokens;
        match dollars {
            Some(d) => self.dollars += d,
            None => self.unpriced_calls += 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("budget exhausted: {what} ({spent} spent of {limit} allowed); the run stops here with its state saved (raise [budget] {key} in ksearch.toml or the matching flag to continue)")]
pub struct BudgetExceeded {
    pub what: String,
    pub key: String,
    pub spent: String,
    pub limit: String,
}

#[derive(Debug, Clone, Default)]
pub struct Budget {
    pub limits: BudgetLimits,
    pub spent: Spent,
}

impl Budget {
    pub fn new(limits: BudgetLimits) -> Budget {
        Budget {
            limits,
            spent: Spent::default(),
        }
    }

    /// Whether one more call may start.
    pub fn check(&self) -> Result<(), BudgetExceeded> {
        let s = &self.spent;
        if let Some(max) = self.limits.max_calls {
            if s.calls >= max {
                return Err(exceeded("LLM calls", "max_calls", s.calls.to_string(), max.to_string()));
            }
        }
        if let Some(max) = self.limits.max_tokens {
            if s.tokens() >= max {
                return Err(exceeded(
                    "tokens",
                    "max_tokens",
                    s.tokens().to_string(),
                    max.to_string(),
                ));
            }
        }
        if let Some(max) = self.limits.max_dollars {
            if s.dollars >= max {
                return Err(exceeded(
                    "dollars",
                    "max_dollars",
                    format!("${:.2}", s.dollars),
                    format!("${max:.2}"),
                ));
            }
        }
        Ok(())
    }

    pub fn record(&mut self, usage: &Usage, dollars: Option<f64>) {
        self.spent.add(usage, dollars);
    }
}

fn exceeded(what: &str, key: &str, spent: String, limit: String) -> BudgetExceeded {
    BudgetExceeded {
        what: what.to_string(),
        key: key.to_string(),
        spent,
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_each_limit() {
        let u = Usage {
            input_tokens: 600,
            output_tokens: 400,
            ..Usage::default()
        };
        let mut b = Budget::new(BudgetLimits {
            max_calls: Some(2),
            ..Default::default()
        });
        b.record(&u, Some(0.1));
        assert!(b.check().is_ok());
        b.record(&u, Some(0.1));
        let e = b.check().unwrap_err();
        assert_eq!((e.what.as_str(), e.spent.as_str()), ("LLM calls", "2"));
        assert!(e.to_string().contains("max_calls"));

        let mut t = Budget::new(BudgetLimits {
            max_tokens: Some(1500),
            ..Default::default()
        });
        t.record(&u, None);
        assert!(t.check().is_ok());
        t.record(&u, None);
        assert_eq!(t.check().unwrap_err().key, "max_tokens");
        assert_eq!(t.spent.unpriced_calls, 2);

        let mut d = Budget::new(BudgetLimits {
            max_dollars: Some(0.15),
            ..Default::default()
        });
        d.record(&u, Some(0.1));
        assert!(d.check().is_ok());
        d.record(&u, Some(0.1));
        assert_eq!(d.check().unwrap_err().spent, "$0.20");
    }
}
