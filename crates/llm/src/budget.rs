//! Budgets on LLM calls, tokens and dollars. The check happens before each call, so a run
//! stops cleanly at the limit with its state saved, never halfway through an answer.

use crate::Usage;
use serde::{Deserialize, Serialize};

/// The `[budget]` table of ksearch.toml (or the matching flags): limits on a whole run's LLM
/// use, `None` meaning no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimits {
    /// LLM calls (cache hits do not count).
    pub max_calls: Option<u64>,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    /// US dollars, of calls whose price is known.
    pub max_dollars: Option<f64>,
}

/// What has been spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Calls made (cache hits are not recorded).
    pub calls: u64,
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Completion tokens, reasoning ones included.
    pub output_tokens: u64,
    /// Prompt tokens served from the vendor's prompt cache.
    pub cached_input_tokens: u64,
    /// Output tokens spent on hidden reasoning.
    pub reasoning_tokens: u64,
    /// US dollars, of the calls whose price is known.
    pub dollars: f64,
    /// Calls whose model had no known price (their cost is not in `dollars`).
    pub unpriced_calls: u64,
}

impl Spent {
    /// Input plus output tokens: what `max_tokens` limits.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Counts one call of `usage`; `dollars` is `None` when its price is unknown (counted in
    /// `unpriced_calls` instead).
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

/// A limit of [`BudgetLimits`] is reached: the next call must not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("budget exhausted: {what} ({spent} spent of {limit} allowed); the run stops here with its state saved (raise [budget] {key} in ksearch.toml or the matching flag to continue)")]
pub struct BudgetExceeded {
    /// What ran out, in words: `LLM calls`, `tokens`, `dollars`.
    pub what: String,
    /// The `[budget]` key that sets the limit: `max_calls`, `max_tokens`, `max_dollars`.
    pub key: String,
    /// What was spent, formatted for the message (`$4.02` for dollars).
    pub spent: String,
    /// The limit, formatted the same way.
    pub limit: String,
}

/// A run's limits and what it has spent against them; shared by all roles of the run.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// The limits, as configured.
    pub limits: BudgetLimits,
    /// What has been spent so far.
    pub spent: Spent,
}

impl Budget {
    /// A budget with `limits` and nothing spent yet.
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

    /// Accounts one finished call (see [`Spent::add`]).
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
