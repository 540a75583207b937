//! Provider configuration: built-in presets, `ksearch.toml` (user level, then project level,
//! the project winning key by key), and `PROVIDER[:MODEL]` specs from the command line.
//!
//! ```toml
//! [providers.gpu-box]            # a new provider, or overrides of a preset's fields
//! kind = "openai-chat"           # openai-chat | openai-responses | anthropic | gemini
//! base_url = "http://gpu-box:8000/v1"
//! model = "qwen3-coder"
//! api_key_env = "GPU_BOX_KEY"    # omit for servers without keys
//! timeout_s = 600                # read timeout per attempt
//!
//! [roles]
//! planner = "anthropic:claude-sonnet-4-5"
//! coder = "gpu-box"
//!
//! [budget]
//! max_calls = 400
//! max_dollars = 20.0
//!
//! [prices."qwen3-coder"]
//! input_per_mtok = 0.0
//! output_per_mtok = 0.0
//! ```

use crate::budget::BudgetLimits;
use crate::prices::Price;
use crate::LlmError;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
/// Which wire protocol a provider speaks.
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI-compatible `POST {base_url}/chat/completions` (OpenAI, vLLM, llama.cpp, Ollama,
    /// LM Studio, OpenRouter, Gemini's OpenAI endpoint, ...).
    OpenaiChat,
    /// OpenAI `POST {base_url}/responses`, for reasoning models.
    OpenaiResponses,
    /// Anthropic `POST {base_url}/v1/messages`.
    Anthropic,
    /// Gemini `POST {base_url}/models/{model}:generateContent`.
    Gemini,
}

impl ProviderKind {
    /// The spelling ksearch.toml's `kind` uses: `openai-chat`, `openai-responses`, `anthropic`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenaiChat => "openai-chat",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }
}

/// Everything needed to talk to one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// The provider's name in the configuration (`openai`, `gpu-box`).
    pub name: String,
    /// The wire protocol.
    pub kind: ProviderKind,
    /// The API's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model to ask for, as the vendor names it.
    pub model: String,
    /// The environment variable holding the API key; `None` for servers without keys.
    pub api_key_env: Option<String>,
    /// Read timeout of one attempt, seconds.
    pub timeout_s: f64,
    /// Connect timeout of one attempt, seconds.
    pub connect_timeout_s: f64,
    /// Default sampling temperature of requests that set none; `None` sends none.
    pub temperature: Option<f32>,
    /// Default output-token limit of requests that set none.
    pub max_tokens: Option<u32>,
    /// Default reasoning effort (`low`, `medium`, `high`) of requests that set none.
    pub reasoning_effort: Option<String>,
    /// Retries after the first attempt, on 429, 5xx, timeouts and connection failures.
    pub max_retries: u32,
    /// First backoff delay, doubled at each retry (with jitter), capped by `retry_max_delay_s`.
    pub retry_base_delay_s: f64,
    /// The longest backoff delay, seconds (a server's Retry-After may ask for longer).
    pub retry_max_delay_s: f64,
}

/// One `[providers.NAME]` table; unset fields come from the preset of the same name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// See [`ProviderConfig::kind`]; required for a name that is not a preset.
    pub kind: Option<ProviderKind>,
    /// See [`ProviderConfig::base_url`].
    pub base_url: Option<String>,
    /// The default model of this provider (`--llm NAME:MODEL` overrides it).
    pub model: Option<String>,
    /// See [`ProviderConfig::api_key_env`].
    pub api_key_env: Option<String>,
    /// See [`ProviderConfig::timeout_s`].
    pub timeout_s: Option<f64>,
    /// See [`ProviderConfig::connect_timeout_s`].
    pub connect_timeout_s: Option<f64>,
    /// See [`ProviderConfig::temperature`].
    pub temperature: Option<f32>,
    /// See [`ProviderConfig::max_tokens`].
    pub max_tokens: Option<u32>,
    /// See [`ProviderConfig::reasoning_effort`].
    pub reasoning_effort: Option<String>,
    /// See [`ProviderConfig::max_retries`].
    pub max_retries: Option<u32>,
    /// See [`ProviderConfig::retry_base_delay_s`].
    pub retry_base_delay_s: Option<f64>,
    /// See [`ProviderConfig::retry_max_delay_s`].
    pub retry_max_delay_s: Option<f64>,
}

/// The `[roles]` table: which `PROVIDER:MODEL` answers each role when no flag says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    /// `PROVIDER:MODEL` (or a provider name) for the planner.
    pub planner: Option<String>,
    /// `PROVIDER:MODEL` (or a provider name) for the coder.
    pub coder: Option<String>,
}

/// The whole `ksearch.toml` (LLM part).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// `[providers.NAME]` tables, by name, in file order.
    #[serde(default)]
    pub providers: IndexMap<String, ProviderEntry>,
    /// `[roles]`: the default model of each role.
    #[serde(default)]
    pub roles: Roles,
    /// `[budget]`: the run's limits.
    #[serde(default)]
    pub budget: BudgetLimits,
    /// `[prices.MODEL]`: prices that override the built-in table, by model name.
    #[serde(default)]
    pub prices: IndexMap<String, Price>,
}

/// (name, kind, base URL, key variable) of the providers that work without configuration.
const PRESETS: &[(&str, ProviderKind, &str, Option<&str>)] = &[
    (
        "openai",
        ProviderKind::OpenaiChat,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
    ),
    (
        "openai-responses",
        ProviderKind::OpenaiResponses,
        "https://api.openai.com/v1",
        Some("OPENAI_API_KEY"),
    ),
    (
        "anthropic",
        ProviderKind::Anthropic,
        "https://api.anthropic.com",
        Some("ANTHROPIC_API_KEY"),
    ),
    (
        "gemini",
        ProviderKind::Gemini,
        "https://generativelanguage.googleapis.com/v1beta",
        Some("GEMINI_API_KEY"),
    ),
    (
        "openrouter",
        ProviderKind::OpenaiChat,
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
    ),
    ("ollama", ProviderKind::OpenaiChat, "http://localhost:11434/v1", None),
    ("vllm", ProviderKind::OpenaiChat, "http://localhost:8000/v1", None),
    ("lmstudio", ProviderKind::OpenaiChat, "http://localhost:1234/v1", None),
    ("llamacpp", ProviderKind::OpenaiChat, "http://localhost:8080/v1", None),
];

/// The names of the built-in providers (`openai`, `anthropic`, `ollama`, ...), usable without
/// a `[providers]` table.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

impl LlmConfig {
    /// Parses one ksearch.toml; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<LlmConfig, LlmError> {
        toml::from_str(text).map_err(|e| LlmError::Config(format!("{file}: {}", e.message().trim())))
    }

    /// Reads the user-level file, then the project-level one (`./ksearch.toml`), merging them
    /// key by key with the project winning. Missing files are fine.
    pub fn load(project_dir: &Path) -> Result<LlmConfig, LlmError> {
        let mut merged = toml::Table::new();
        for path in [user_config_path(), Some(project_dir.join("ksearch.toml"))]
            .into_iter()
            .flatten()
        {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(LlmError::Config(format!("{}: cannot read: {e}", path.display()))),
            };
            let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
                LlmError::Config(format!("{}: {}", path.display(), e.message().trim()))
            })?;
            // Validate each file on its own so errors name the right file.
            LlmConfig::parse(&path.display().to_string(), &text)?;
            merge(&mut merged, table);
        }
        LlmConfig::deserialize(toml::Value::Table(merged)).map_err(|e| LlmError::Config(e.to_string()))
    }

    /// Resolves `PROVIDER` or `PROVIDER:MODEL` (the model may itself contain ':').
    pub fn resolve(&self, spec: &str) -> Result<ProviderConfig, LlmError> {
        let (name, model) = match spec.split_once(':') {
            Some((n, m)) => (n, Some(m)),
            None => (spec, None),
        };
        let preset = PRESETS.iter().find(|p| p.0 == name);
        let entry = self.providers.get(name);
        if preset.is_none() && entry.is_none() {
            let mut known: Vec<String> = preset_names().iter().map(|s| s.to_string()).collect();
            known.extend(self.providers.keys().cloned());
            return Err(LlmError::Config(format!(
                "unknown provider '{name}'; known: {} (or define [providers.{name}] in ksearch.toml)",
                known.join(", ")
            )));
        }
        let e = entry.cloned().unwrap_or_default();
        let kind = e.kind.or(preset.map(|p| p.1)).ok_or_else(|| {
            LlmError::Config(format!(
                "providers.{name}.kind is not set (openai-chat, openai-responses, anthropic or gemini)"
            ))
        })?;
        let base_url = e
            .base_url
            .or(preset.map(|p| p.2.to_string()))
            .ok_or_else(|| LlmError::Config(format!("providers.{name}.base_url is not set")))?;
        let model = model
            .map(str::to_string)
            .filter(|m| !m.is_empty())
            .or(e.model)
            .ok_or_else(|| {
                LlmError::Config(format!(
                    "no model for provider '{name}': write `{name}:MODEL` or set providers.{name}.model in ksearch.toml"
                ))
            })?;
        let api_key_env = e.api_key_env.or(preset.and_then(|p| p.3.map(str::to_string)));
        let config = ProviderConfig {
            name: name.to_string(),
            kind,
            base_url: base_url.trim_end_matches('/').to_string(),
            model,
            api_key_env,
            timeout_s: e.timeout_s.unwrap_or(300.0),
            connect_timeout_s: e.connect_timeout_s.unwrap_or(10.0),
            temperature: e.temperature,
            max_tokens: e.max_tokens.or(Some(16384)),
            reasoning_effort: e.reasoning_effort,
            max_retries: e.max_retries.unwrap_or(5),
            retry_base_delay_s: e.retry_base_delay_s.unwrap_or(1.0),
            retry_max_delay_s: e.retry_max_delay_s.unwrap_or(60.0),
        };
        config.validate()?;
        Ok(config)
    }
}

impl ProviderConfig {
    fn validate(&self) -> Result<(), LlmError> {
        let name = &self.name;
        let bad = |field: &str, why: &str| Err(LlmError::Config(format!("providers.{name}.{field}: {why}")));
        if !(self.base_url.starts_with("http://") || self.base_url.starts_with("https://")) {
            return bad(
                "base_url",
                &format!("'{}' must start with http:// or https://", self.base_url),
            );
        }
        if !(self.timeout_s > 0.0 && self.timeout_s.is_finite()) {
            return bad("timeout_s", "must be a positive number of seconds");
        }
        if !(self.connect_timeout_s > 0.0 && self.connect_timeout_s.is_finite()) {
            return bad("connect_timeout_s", "must be a positive number of seconds");
        }
        if let Some(effort) = &self.reasoning_effort {
            if !["minimal", "low", "medium", "high"].contains(&effort.as_str()) {
                return bad(
                    "reasoning_effort",
                    &format!("'{effort}' is not one of minimal, low, medium, high"),
                );
            }
        }
        if !(self.retry_base_delay_s >= 0.0 && self.retry_max_delay_s >= self.retry_base_delay_s) {
            return bad(
                "retry_max_delay_s",
                "needs 0 <= retry_base_delay_s <= retry_max_delay_s",
            );
        }
        Ok(())
    }
}

fn user_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("ksearch").join("ksearch.toml"))
}

/// Deep merge: tables merge key by key, anything else in `over` replaces what `base` had.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_resolve_with_a_model() {
        let cfg = LlmConfig::default();
        let p = cfg.resolve("anthropic:claude-sonnet-4-5").unwrap();
        assert_eq!(
            (p.kind, p.model.as_str()),
            (ProviderKind::Anthropic, "claude-sonnet-4-5")
        );
        assert_eq!(p.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        let o = cfg.resolve("ollama:qwen2.5-coder:32b").unwrap();
        assert_eq!((o.model.as_str(), o.api_key_env.clone()), ("qwen2.5-coder:32b", None));
    }

    #[test]
    fn missing_model_and_unknown_provider_say_what_to_do() {
        let cfg = LlmConfig::default();
        let e = cfg.resolve("openai").unwrap_err().to_string();
        assert!(e.contains("write `openai:MODEL`"), "{e}");
        let e = cfg.resolve("opanai:gpt-5").unwrap_err().to_string();
        assert!(e.contains("unknown provider 'opanai'") && e.contains("openai"), "{e}");
    }

    #[test]
    fn file_entries_override_presets_and_define_new_providers() {
        let cfg = LlmConfig::parse(
            "ksearch.toml",
            "[providers.openai]\nmodel = \"gpt-5\"\ntimeout_s = 30\n[providers.box]\nkind = \"openai-chat\"\nbase_url = \"http://box:8000/v1/\"\nmodel = \"m\"\n",
        )
        .unwrap();
        let o = cfg.resolve("openai").unwrap();
        assert_eq!((o.model.as_str(), o.timeout_s), ("gpt-5", 30.0));
        let b = cfg.resolve("box").unwrap();
        assert_eq!(b.base_url, "http://box:8000/v1");
        assert_eq!(b.api_key_env, None);
    }

    #[test]
    fn bad_values_are_named() {
        let e = LlmConfig::parse("ksearch.toml", "[providers.x]\nkind = \"openai\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ksearch.toml") && e.contains("unknown variant `openai`"),
            "{e}"
        );
        let cfg = LlmConfig::parse(
            "k.toml",
            "[providers.x]\nkind = \"gemini\"\nbase_url = \"ftp://x\"\nmodel = \"m\"\n",
        )
        .unwrap();
        assert!(cfg
            .resolve("x")
            .unwrap_err()
            .to_string()
            .contains("providers.x.base_url"));
    }

    #[test]
    fn merge_is_key_by_key() {
        let mut base: toml::Table = "[providers.a]\nmodel = \"m1\"\ntimeout_s = 5\n".parse().unwrap();
        merge(&mut base, "[providers.a]\nmodel = \"m2\"\n".parse().unwrap());
        assert_eq!(base["providers"]["a"]["model"].as_str(), Some("m2"));
        assert_eq!(base["providers"]["a"]["timeout_s"].as_integer(), Some(5));
    }
}
