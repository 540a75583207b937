//! Token prices as data (`data/prices.toml`), overridable per model in ksearch.toml.

use crate::Usage;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Rate of uncached prompt tokens.
    pub input_per_mtok: f64,
    /// Rate of completion tokens (reasoning ones included).
    pub output_per_mtok: f64,
    /// Rate of cached prompt tokens; the input rate when absent.
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
}

impl Price {
    /// What `usage` costs in US dollars, cached prompt tokens at the cached rate.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input_tokens.min(usage.input_tokens) as f64;
        let uncached = usage.input_tokens as f64 - cached;
        let cached_rate = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        (uncached * self.input_per_mtok + cached * cached_rate + usage.output_tokens as f64 * self.output_per_mtok)
            / 1e6
    }
}

#[derive(Deserialize)]
struct PriceFile {
    #[allow(dead_code)]
    as_of: String,
    models: IndexMap<String, Price>,
}

const BUILTIN: &str = include_str!("../data/prices.toml");

/// Prices by model name: the built-in `data/prices.toml` with ksearch.toml's overrides.
#[derive(Debug, Clone)]
pub struct PriceTable {
    models: IndexMap<String, Price>,
}

impl PriceTable {
    /// The built-in table with `overrides` (from ksearch.toml) taking precedence.
    pub fn new(overrides: &IndexMap<String, Price>) -> PriceTable {
        // The file is ours and covered by a test, so a parse failure is a build defect.
        let file: PriceFile = toml::from_str(BUILTIN).unwrap_or_else(|e| panic!("data/prices.toml: {e}"));
        let mut models = file.models;
        for (k, v) in overrides {
            models.insert(k.clone(), *v);
        }
        PriceTable { models }
    }

    /// The price of `model`: an exact entry, else the longest entry the name starts with.
    pub fn lookup(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.models.get(model) {
            return Some(*p);
        }
        // Vendors prefix models ("openai/gpt-5", "models/gemini-2.5-pro"); match the last part too.
        let short = model.rsplit('/').next().unwrap_or(model);
        self.models
            .iter()
            .filter(|(k, _)| short.starts_with(k.as_str()) || model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
    }

    /// Dollars for `usage` on `model`; `None` when the model's price is unknown.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.lookup(model).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_prefix_matches() {
        let t = PriceTable::new(&IndexMap::new());
        assert!(t.lookup("gpt-5").is_some());
        // A dated snapshot takes its family's price; the longest prefix wins (gpt-5-mini, not gpt-5).
        assert_eq!(t.lookup("gpt-5-mini-2025-08-07"), t.lookup("gpt-5-mini"));
        assert_ne!(t.lookup("gpt-5-mini"), t.lookup("gpt-5"));
        assert_eq!(t.lookup("openai/gpt-4o"), t.lookup("gpt-4o"));
        assert_eq!(t.lookup("my-local-model"), None);
    }

    #[test]
    fn cost_counts_cached_tokens_at_their_rate() {
        let p = Price {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cached_input_per_mtok: Some(0.5),
        };
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 400_000,
            output_tokens: 500_000,
            reasoning_tokens: 0,
        };
        assert!((p.cost(&u) - (0.6 * 2.0 + 0.4 * 0.5 + 0.5 * 8.0)).abs() < 1e-12);
    }

    #[test]
    fn overrides_win() {
        let mut o = IndexMap::new();
        o.insert(
            "gpt-5".to_string(),
            Price {
                input_per_mtok: 0.0,
                output_per_mtok: 0.0,
                cached_input_per_mtok: None,
            },
        );
        assert_eq!(PriceTable::new(&o).lookup("gpt-5").unwrap().input_per_mtok, 0.0);
    }
}
