//! Serves the engine's requests: LLM calls for the planner and coder, evaluations for
//! candidates. Every answer is recorded in the store and its event appended *before* the engine
//! sees it, so a crash at any point loses at most the request in flight, which `resume` serves
//! again.

use crate::brains::Brains;
use crate::summary::summarize;
use anyhow::Context;
use ksearch_eval::{evaluate, EvalError, EvalOptions};
use ksearch_llm::{ChatRequest, LlmClient, LlmError};
use ksearch_search::engine::{Engine, EvalSummary, Event, Purpose, Request, Source};
use ksearch_spec::{language_of, language_of_in, BuildSpec, Solution, SourceFile, Task};
use ksearch_store::{CandidateRow, EvaluationRow, ExchangeRow, RunStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub(crate) struct Driver<'a> {
    pub store: &'a RunStore,
    pub engine: Engine,
    pub brains: Brains,
    pub task: &'a Task,
    pub run_seed: u64,
    pub eval_template: EvalOptions,
    pub quiet: bool,
    /// Set by Ctrl-C: stop after the step in flight.
    pub stop: Arc<AtomicBool>,
    /// When replaying a recorded run: its evaluations, by candidate sources and purpose, so the
    /// replay sees the numbers the original saw (and renders the same prompts).
    pub recorded: Option<RecordedEvaluations>,
}

/// Evaluation summaries of a recorded run, keyed by what was evaluated.
pub(crate) type RecordedEvaluations = std::collections::HashMap<(i64, String, bool), EvalSummary>;

/// The key of an evaluation: the candidate (its id and its files: two candidates may share files
/// and still measure differently) and whether it was the final re-measurement.
pub(crate) fn evaluation_key(candidate_id: i64, sources: &[Source], purpose: Purpose) -> (i64, String, bool) {
    (
        candidate_id,
        serde_json::to_string(sources).unwrap_or_default(),
        purpose == Purpose::Final,
    )
}

/// Reads a recorded run's evaluations from its event log.
pub(crate) fn recorded_evaluations(store: &RunStore) -> anyhow::Result<RecordedEvaluations> {
    let events = crate::run_cmd::load_events(store)?;
    let mut engine = Engine::new();
    let mut out = RecordedEvaluations::new();
    for e in &events {
        if let (
            Event::Evaluated { summary, .. },
            Some(Request::Evaluate {
                candidate_id,
                sources,
                purpose,
                ..
            }),
        ) = (e, engine.pending())
        {
            out.insert(evaluation_key(*candidate_id, sources, *purpose), summary.clone());
        }
        engine
            .apply(e)
            .context("the recorded run's event log does not replay")?;
    }
    Ok(out)
}

/// Why the loop returned.
pub(crate) enum Stopped {
    Finished {
        best: Option<i64>,
        reason: String,
    },
    Interrupted,
    /// A planner or coder request waits for an external agent (agent mode).
    AwaitingAgent {
        id: String,
        role: &'static str,
    },
}

impl Driver<'_> {
    pub(crate) fn run(&mut self, rt: &tokio::runtime::Runtime) -> anyhow::Result<Stopped> {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(Stopped::Interrupted);
            }
            let Some(request) = self.engine.pending().cloned() else {
                anyhow::bail!("the engine has nothing to do: the run's event log does not start with `started`");
            };
            let event = match request.clone() {
                Request::Finished { best_candidate, reason } => {
                    return Ok(Stopped::Finished {
                        best: best_candidate,
                        reason,
                    });
                }
                Request::Plan { .. } | Request::Code { .. } if self.brains.tuner.is_some() => {
                    self.tuner_event(&request)?
                }
                Request::Plan { id, plan, messages } => {
                    let Some(client) = &self.brains.planner else {
                        return self.await_agent(&request);
                    };
                    let spinner = self.waiting(&format!("planner: {} ...", plan_label(&plan)));
                    let answer = rt.block_on(ask(client, self.store, &id, messages))?;
                    if let Some(s) = spinner {
                        s.finish_and_clear();
                    }
                    match answer {
                        Ok(text) => Event::PlannerAnswered { request_id: id, text },
                        Err((error, fatal)) => Event::RequestFailed {
                            request_id: id,
                            error,
                            fatal,
                        },
                    }
                }
                Request::Code {
                    id,
                    code,
                    node_id,
                    messages,
                    ..
                } => {
                    let Some(client) = &self.brains.coder else {
                        return self.await_agent(&request);
                    };
                    let spinner = self.waiting(&format!(
                        "coder: {} for {node_id} (round {}) ...",
                        code.as_str(),
                        self.engine.round()
                    ));
                    let answer = rt.block_on(ask(client, self.store, &id, messages))?;
                    if let Some(s) = spinner {
                        s.finish_and_clear();
                    }
                    match answer {
                        Ok(text) => Event::CoderAnswered { request_id: id, text },
                        Err((error, fatal)) => Event::RequestFailed {
                            request_id: id,
                            error,
                            fatal,
                        },
                    }
                }
                Request::Evaluate {
                    id,
                    candidate_id,
                    purpose,
                    language,
                    sources,
                } => match self
                    .recorded
                    .as_ref()
                    .and_then(|r| r.get(&evaluation_key(candidate_id, &sources, purpose)))
                {
                    Some(summary) => Event::Evaluated {
                        request_id: id,
                        candidate_id,
                        summary: summary.clone(),
                    },
                    None => {
                        let spinner = self.waiting(&format!("evaluating candidate {candidate_id} ..."));
                        let event = self.evaluate_event(id, candidate_id, purpose, &language, &sources);
                        if let Some(s) = spinner {
                            s.finish_and_clear();
                        }
                        event?
                    }
                },
            };
            let body = serde_json::to_value(&event).context("cannot encode an event")?;
            self.store.append_event(event.kind(), &body)?;
            self.engine.apply(&event).context("the engine refused its own event")?;
            self.report(&event);
        }
    }

    fn evaluate_event(
        &self,
        id: String,
        candidate_id: i64,
        purpose: Purpose,
        language: &str,
        sources: &[Source],
    ) -> anyhow::Result<Event> {
        Ok(match self.evaluate(candidate_id, purpose, language, sources)? {
            Ok(summary) => Event::Evaluated {
                request_id: id,
                candidate_id,
                summary,
            },
            Err(error) => Event::RequestFailed {
                request_id: id,
                error,
                fatal: true,
            },
        })
    }

    /// The tuner's answer, recorded like an LLM exchange so the run's history is complete.
    fn tuner_event(&self, request: &Request) -> anyhow::Result<Event> {
        let Some(tuner) = &self.brains.tuner else {
            anyhow::bail!("no tuner")
        };
        let id = request.id().unwrap_or_default().to_string();
        let answer = tuner.answer(&self.engine, request);
        self.store.record_exchange(&ExchangeRow {
            request_id: Some(id.clone()),
            role: request.role().to_string(),
            provider: "tuner".into(),
            model: "tuner".into(),
            answer: answer.as_ref().ok().map(|t| serde_json::json!({"text": t})),
            error: answer.as_ref().err().cloned(),
            attempts: 1,
            ..Default::default()
        })?;
        Ok(match (answer, request) {
            (Ok(text), Request::Plan { .. }) => Event::PlannerAnswered { request_id: id, text },
            (Ok(text), _) => Event::CoderAnswered { request_id: id, text },
            (Err(error), _) => Event::RequestFailed {
                request_id: id,
                error,
                fatal: true,
            },
        })
    }

    /// Leaves an LLM request pending in the store for an external agent and stops.
    fn await_agent(&self, request: &Request) -> anyhow::Result<Stopped> {
        let id = request.id().unwrap_or_default().to_string();
        let mut body = serde_json::to_value(request).context("cannot encode a request")?;
        body["answer_format"] = serde_json::json!(answer_format(request));
        self.store.put_request(&id, request.role(), &body)?;
        Ok(Stopped::AwaitingAgent {
            id,
            role: request.role(),
        })
    }

    /// Shows what is being waited for: a spinner on a terminal, one line otherwise. The
    /// spinner is cleared by dropping the returned bar's `finish_and_clear`.
    fn waiting(&self, line: &str) -> Option<indicatif::ProgressBar> {
        if self.quiet {
            return None;
        }
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!("  {line}");
            return None;
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message(line.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Some(bar)
    }

    fn report(&self, event: &Event) {
        if let Event::Evaluated {
            candidate_id, summary, ..
        } = event
        {
            let c = self.engine.candidate(*candidate_id);
            let best = self
                .engine
                .best()
                .map(|b| format!("best {:.2}x (candidate {})", b.speedup().unwrap_or(0.0), b.id))
                .unwrap_or_else(|| "no passing candidate yet".into());
            // A final re-measurement is labelled as such, not as the round that produced it.
            let is_final = c.is_some_and(|c| c.final_result.as_ref() == Some(summary));
            let round = match c {
                Some(_) if is_final => "final".to_string(),
                Some(c) => c.round.to_string(),
                None => "-".to_string(),
            };
            let node = c.map(|c| c.node_id.as_str()).unwrap_or("-");
            if !self.quiet {
                eprintln!(
                    "round {round:>5}  node {node:<6} candidate {candidate_id:<4} {:<60}  {best}",
                    ksearch_search::engine::verdict(summary)
                        .chars()
                        .take(60)
                        .collect::<String>()
                );
            }
        }
    }

    /// Evaluates one candidate. `Err` only when the evaluator itself cannot run (fatal).
    fn evaluate(
        &self,
        candidate_id: i64,
        purpose: Purpose,
        language: &str,
        sources: &[Source],
    ) -> anyhow::Result<Result<EvalSummary, String>> {
        let c = self.engine.candidate(candidate_id);
        self.store.add_candidate(&CandidateRow {
            id: candidate_id,
            parent_id: c.and_then(|c| c.parent),
            node_id: c.map(|c| c.node_id.clone()),
            round: c.map(|c| c.round).unwrap_or(0),
            cycle: c.map(|c| c.cycle).unwrap_or(0),
            origin: if c.is_some_and(|c| c.cycle == 0 && c.round == 0) {
                "seed"
            } else if c.is_some_and(|c| c.note.is_some()) {
                "knob_sweep"
            } else {
                "coder"
            }
            .to_string(),
            language: language.to_string(),
            sources: serde_json::to_value(sources).unwrap_or_default(),
        })?;
        let solution = match self.solution(candidate_id, language, sources) {
            Ok(s) => s,
            Err(reason) => {
                let summary = EvalSummary {
                    status: "rejected".into(),
                    reason: Some(reason),
                    speedup: None,
                    relative_noise: None,
                    workloads: vec![],
                    log_tail: String::new(),
                    suspicious: None,
                };
                return Ok(Ok(summary));
            }
        };
        let mut opts = self.eval_template.clone();
        // Every evaluation draws its own inputs, reproducibly from the run's seed.
        opts.seed = self
            .run_seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add((candidate_id as u64) << 1 | (purpose == Purpose::Final) as u64);
        opts.fail_fast = purpose == Purpose::Search;
        let notify = |m: &str| eprintln!("ksearch: {m}");
        let evaluation = match evaluate(self.task, &solution, &opts, &notify) {
            Ok(e) => e,
            Err(EvalError::Task(p)) => return Ok(Err(format!("the task is unusable: {p}"))),
            Err(e) => return Ok(Err(format!("the evaluator cannot run: {e}"))),
        };
        let summary = summarize(&evaluation);
        self.store.add_evaluation(&EvaluationRow {
            id: None,
            candidate_id,
            purpose: match purpose {
                Purpose::Search => "search",
                Purpose::Final => "final",
            }
            .into(),
            status: summary.status.clone(),
            speedup: summary.speedup,
            record: serde_json::to_value(&evaluation).unwrap_or_default(),
        })?;
        Ok(Ok(summary))
    }

    /// The candidate as a solution of the task; `Err` says why it cannot be one.
    fn solution(&self, candidate_id: i64, language: &str, sources: &[Source]) -> Result<Solution, String> {
        let entry = self.task.config.kernel.entry.clone().unwrap_or_else(|| "kernel".into());
        let default = self.engine.task().map(|t| t.default_file.clone()).unwrap_or_default();
        let entry_file = sources
            .iter()
            .find(|s| s.path == default)
            .or_else(|| sources.iter().find(|s| language_of(&s.path).is_some()))
            .or(sources.first())
            .map(|s| s.path.clone())
            .unwrap_or(default);
        // A candidate's language follows its entry file, so a task may take kernels in several
        // languages (a CUDA seed, a Triton template); the task's language is the fallback.
        let task_language = &self.task.config.kernel.language;
        let language = language_of_in(&entry_file, task_language).unwrap_or(language);
        let destination_passing_style =
            matches!(language, "c" | "cuda") || self.task.config.kernel.calling == ksearch_spec::Calling::Dps;
        let solution = Solution {
            name: format!("candidate-{candidate_id}"),
            definition: self.task.definition.name.clone(),
            author: Some("ksearch".into()),
            spec: BuildSpec {
                language: language.to_string(),
                target_hardware: vec![],
                entry_point: format!("{entry_file}::{entry}"),
                dependencies: vec![],
                destination_passing_style,
            },
            sources: sources
                .iter()
                .map(|s| SourceFile {
                    path: s.path.clone(),
                    content: s.content.clone(),
                })
                .collect(),
            description: None,
        };
        solution
            .validate(&format!("candidate {candidate_id}"), self.task)
            .map_err(|e| e.to_string())?;
        Ok(solution)
    }
}

/// What an answer to `request` must look like, in one sentence for the agent.
pub(crate) fn answer_format(request: &Request) -> &'static str {
    match request {
        Request::Plan { .. } => {
            "one JSON object (kernel_summary, open_questions, ops: an edit script) as the prompt's \"Answer format\" \
             section describes; prose around it is ignored"
        }
        Request::Code { .. } => {
            "the complete source of every file of the kernel, each in a fenced code block preceded by its file name \
             (or inside <file path=\"NAME\">...</file> tags)"
        }
        _ => "no answer: this request is served by ksearch itself",
    }
}

fn plan_label(plan: &ksearch_search::engine::PlanKind) -> String {
    use ksearch_search::engine::PlanKind;
    match plan {
        PlanKind::Init => "initial plan".into(),
        PlanKind::Propose => "propose actions".into(),
        PlanKind::Refine { node_id } => format!("refine after {node_id}"),
        PlanKind::TooHard { node_id } => format!("{node_id} was too hard"),
    }
}

/// One LLM call, recorded in the store whatever happens. `Ok(Err((message, fatal)))` when the
/// call failed: fatal for what retrying cannot fix (keys, models, budgets, replay gaps).
async fn ask(
    client: &LlmClient,
    store: &RunStore,
    request_id: &str,
    messages: Vec<ksearch_llm::Message>,
) -> anyhow::Result<Result<String, (String, bool)>> {
    // Answered before a crash but never turned into an event: use that answer, don't pay twice.
    if let Some(answer) = store.answer_for_request(request_id)? {
        if let Ok(response) = serde_json::from_value::<ksearch_llm::ChatResponse>(answer) {
            return Ok(Ok(response.text));
        }
    }
    let request = ChatRequest {
        messages,
        ..Default::default()
    };
    let key = client.key(&request);
    let prompt = serde_json::to_value(&request.messages).unwrap_or_default();
    let config = client.config();
    let result = client.complete(&request).await;
    let mut row = ExchangeRow {
        request_id: Some(request_id.to_string()),
        role: client.role().to_string(),
        provider: config.name.clone(),
        model: config.model.clone(),
        key,
        prompt,
        ..Default::default()
    };
    let outcome = match result {
        Ok(c) => {
            row.answer = serde_json::to_value(&c.response).ok();
            row.finish_reason = Some(format!("{:?}", c.response.finish_reason).to_lowercase());
            row.input_tokens = c.response.usage.input_tokens;
            row.output_tokens = c.response.usage.output_tokens;
            row.cached_input_tokens = c.response.usage.cached_input_tokens;
            row.reasoning_tokens = c.response.usage.reasoning_tokens;
            row.cost_dollars = c.cost_dollars;
            row.latency_s = c.response.latency.as_secs_f64();
            row.attempts = c.response.attempts;
            row.from_cache = c.from_cache;
            Ok(c.response.text)
        }
        Err(e) => {
            row.error = Some(e.to_string());
            // What retrying cannot fix ends the run; a bad or odd answer is just a failed try.
            let fatal = matches!(
                e,
                LlmError::Budget(_)
                    | LlmError::Auth { .. }
                    | LlmError::NotFound { .. }
                    | LlmError::MissingKey { .. }
                    | LlmError::Config(_)
                    | LlmError::NoRecordedAnswer { .. }
            );
            Err((e.to_string(), fatal))
        }
    };
    store.record_exchange(&row)?;
    Ok(outcome)
}
