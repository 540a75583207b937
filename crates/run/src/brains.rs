//! The planner and coder: LLM clients built from `--llm` or ksearch.toml, or answers replayed
//! from a recorded run. What was chosen is stored in the run's metadata, so `resume` rebuilds
//! the same brains and `replay` computes the same request keys.

use anyhow::{bail, Context};
use ksearch_llm::budget::{Budget, BudgetLimits};
use ksearch_llm::cache::{MemoryCache, ReplayModel, ResponseCache};
use ksearch_llm::prices::PriceTable;
use ksearch_llm::{ChatModel, ChatResponse, LlmClient, LlmConfig, ProviderConfig};
use ksearch_store::{MetaKey, RunStore};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What serves the two roles; stored in the run's metadata under `brain`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BrainSpec {
    /// Live LLM calls, one provider per role (the same one when both roles name it).
    Llm {
        /// The provider and model that plans: it edits the world model (the tree of hypotheses).
        planner: ProviderConfig,
        /// The provider and model that writes the candidate kernels.
        coder: ProviderConfig,
        /// The call, token and dollar limits shared by both roles; exchanges already in the run's store
        /// count against them, so a resumed run cannot exceed them.
        budget: BudgetLimits,
    },
    /// The answers recorded in another run's store, looked up by request key; no network calls
    /// and no budget. A request the recorded run never made has no answer.
    Replay {
        /// The run directory whose recorded exchanges are replayed.
        from: PathBuf,
        /// The planner the recorded run used: part of each request key, so the keys match.
        planner: ProviderConfig,
        /// The coder the recorded run used, for the same reason.
        coder: ProviderConfig,
    },
    /// An external agent answers both roles (`ksearch agent next|submit`, or `ksearch mcp`).
    Agent,
    /// The knob tuner answers both roles from the task's kernel template; no LLM.
    Tuner,
}

/// The clients of the two roles; `None` where an external agent or the tuner answers.
pub struct Brains {
    /// The planner's client (live or replayed).
    pub planner: Option<LlmClient>,
    /// The coder's client; it shares the planner's budget.
    pub coder: Option<LlmClient>,
    /// The knob tuner built from the task's kernel template, for [`BrainSpec::Tuner`] only.
    pub tuner: Option<ksearch_search::tuner::Tuner>,
}

impl BrainSpec {
    /// From the command line: `--llm` for both roles, or per role; ksearch.toml fills the rest.
    pub fn from_args(
        config: &LlmConfig,
        llm: Option<&str>,
        planner: Option<&str>,
        coder: Option<&str>,
        replay: Option<&PathBuf>,
    ) -> anyhow::Result<BrainSpec> {
        if let Some(dir) = replay {
            let store = RunStore::open(dir).with_context(|| format!("--brain replay:{}", dir.display()))?;
            let meta = store
                .meta(MetaKey::Brain)?
                .context("the run to replay has no recorded brain")?;
            let spec: BrainSpec = serde_json::from_value(meta).context("the recorded brain is unreadable")?;
            let (planner, coder) = match spec {
                BrainSpec::Llm { planner, coder, .. } | BrainSpec::Replay { planner, coder, .. } => (planner, coder),
                BrainSpec::Agent | BrainSpec::Tuner => bail!(
                    "--brain replay:{}: that run was answered by an agent or the tuner; its answers replay through its event log \
                     (`ksearch show`), not as an LLM",
                    dir.display()
                ),
            };
            return Ok(BrainSpec::Replay {
                from: dir.clone(),
                planner,
                coder,
            });
        }
        let pick =
            |role_flag: Option<&str>, role_config: &Option<String>, role: &str| -> anyhow::Result<ProviderConfig> {
                let spec = role_flag.or(llm).or(role_config.as_deref());
                let Some(spec) = spec else {
                    bail!(
                    "no LLM for the {role}: pass --llm PROVIDER:MODEL (e.g. --llm anthropic:claude-sonnet-4-5 with \
                     ANTHROPIC_API_KEY set, or --llm ollama:qwen2.5-coder for a local server), or set [roles] {role} \
                     in ksearch.toml"
                )
                };
                Ok(config.resolve(spec)?)
            };
        Ok(BrainSpec::Llm {
            planner: pick(planner, &config.roles.planner, "planner")?,
            coder: pick(coder, &config.roles.coder, "coder")?,
            budget: config.budget,
        })
    }

    /// Builds the clients. `store` is the run's own store: its recorded exchanges count against
    /// the budget, so a resumed run keeps its limits.
    pub fn build(&self, config: &LlmConfig, store: &RunStore, task: &ksearch_spec::Task) -> anyhow::Result<Brains> {
        if *self == BrainSpec::Tuner {
            return Ok(Brains {
                planner: None,
                coder: None,
                tuner: Some(crate::knowledge::tuner(task)?),
            });
        }
        let prices = Arc::new(PriceTable::new(&config.prices));
        let mut budget = Budget::new(match self {
            BrainSpec::Llm { budget, .. } => *budget,
            BrainSpec::Replay { .. } | BrainSpec::Agent | BrainSpec::Tuner => BudgetLimits::default(),
        });
        for x in store.exchanges()? {
            if x.answer.is_some() && !x.from_cache {
                let usage = ksearch_llm::Usage {
                    input_tokens: x.input_tokens,
                    output_tokens: x.output_tokens,
                    cached_input_tokens: x.cached_input_tokens,
                    reasoning_tokens: x.reasoning_tokens,
                };
                budget.record(&usage, x.cost_dollars);
            }
        }
        let budget = Arc::new(Mutex::new(budget));
        match self {
            BrainSpec::Llm { planner, coder, .. } => {
                let model = |c: &ProviderConfig| -> anyhow::Result<Arc<dyn ChatModel>> {
                    Ok(Arc::from(ksearch_llm::providers::build(c)?))
                };
                Ok(Brains {
                    planner: Some(LlmClient::new(
                        "planner",
                        planner.clone(),
                        model(planner)?,
                        prices.clone(),
                        budget.clone(),
                        None,
                    )),
                    coder: Some(LlmClient::new(
                        "coder",
                        coder.clone(),
                        model(coder)?,
                        prices,
                        budget,
                        None,
                    )),
                    tuner: None,
                })
            }
            BrainSpec::Replay { from, planner, coder } => {
                let recorded = RunStore::open(from)?;
                let cache = Arc::new(MemoryCache::default());
                for x in recorded.exchanges()? {
                    if let Some(answer) = x.answer {
                        if let Ok(response) = serde_json::from_value::<ChatResponse>(answer) {
                            cache.put(&x.key, &response);
                        }
                    }
                }
                let answers: Arc<dyn ResponseCache> = cache;
                let replay = |role: &str, c: &ProviderConfig| -> Arc<dyn ChatModel> {
                    Arc::new(ReplayModel::new(role, c.kind, &c.model, answers.clone()))
                };
                Ok(Brains {
                    planner: Some(LlmClient::new(
                        "planner",
                        planner.clone(),
                        replay("planner", planner),
                        prices.clone(),
                        budget.clone(),
                        None,
                    )),
                    coder: Some(LlmClient::new(
                        "coder",
                        coder.clone(),
                        replay("coder", coder),
                        prices,
                        budget,
                        None,
                    )),
                    tuner: None,
                })
            }
            BrainSpec::Agent | BrainSpec::Tuner => Ok(Brains {
                planner: None,
                coder: None,
                tuner: None,
            }),
        }
    }

    /// A short human-readable name for the brains (`provider:model`, per role when they differ),
    /// for status lines and summaries.
    pub fn describe(&self) -> String {
        match self {
            BrainSpec::Llm { planner, coder, .. } if planner == coder => format!("{}:{}", planner.name, planner.model),
            BrainSpec::Llm { planner, coder, .. } => {
                format!(
                    "planner {}:{}, coder {}:{}",
                    planner.name, planner.model, coder.name, coder.model
                )
            }
            BrainSpec::Replay { from, .. } => format!("replay of {}", from.display()),
            BrainSpec::Agent => "an external agent".to_string(),
            BrainSpec::Tuner => "the knob tuner".to_string(),
        }
    }
}
