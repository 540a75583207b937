//! Serves the engine's requests: LLM calls for the planner and coder, evaluations for
//! candidates, up to the engine's `parallel` at once (docs/engine.md, "Parallel requests").
//!
//! One loop owns the engine and is the run store's only writer. It hands each outstanding
//! request to a worker thread (an LLM call, or an evaluation that first leases a device from
//! the [`DevicePool`]), and as workers finish, in whatever order, it records what they produced,
//! appends the answering event to the store *before* the engine sees it, applies it, and serves
//! the requests that follow. The log's order is the completion order, and it is the truth: a
//! crash at any point loses at most the requests in flight, which `resume` (replaying the log)
//! finds outstanding again and serves again.

mod progress;
pub(crate) mod work;
pub use crate::executor::placement;

use crate::brains::Brains;
use crate::executor::{EvalJob, Executor};
use anyhow::Context;
use ksearch_eval::EvalOptions;
use ksearch_llm::LlmClient;
use ksearch_search::engine::{Engine, EvalSummary, Event, PlanKind, Purpose, Request, Source};
use ksearch_spec::{language_of, language_of_in, BuildSpec, Solution, SourceFile, Task};
use ksearch_store::{CandidateRow, ExchangeRow, RunStore, StopReason, StopRecord};
use progress::Progress;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use work::{answered_before, call_llm, event_request_id, rejected, Done};

pub(crate) struct Driver<'a> {
    pub store: &'a RunStore,
    pub engine: Engine,
    pub brains: Brains,
    pub task: &'a Task,
    pub run_seed: u64,
    pub eval_template: EvalOptions,
    pub quiet: bool,
    /// Set by Ctrl-C: serve nothing new, finish the requests in flight, stop.
    pub stop: Arc<AtomicBool>,
    /// When replaying a recorded run: its evaluations, by candidate sources and purpose, so the
    /// replay sees the numbers the original saw (and renders the same prompts).
    pub recorded: Option<RecordedEvaluations>,
    /// Where evaluations go.
    pub executor: &'a dyn Executor,
    /// The most evaluations this drive starts (`ksearch evaluate --max`); `None`: no limit.
    pub max_evaluations: Option<usize>,
    /// The most requests being served at the same time so far (LLM calls and evaluations).
    pub max_in_flight: usize,
    /// Evaluations this drive ran (their results recorded).
    pub evaluated: Vec<i64>,
    /// Profile every passing search candidate (the run's `profile` setting).
    pub profile: bool,
}

/// What an evaluation was: see [`evaluation_key`].
pub type EvaluationKey = (i64, String, Purpose, usize);

/// Evaluation summaries of a recorded run, keyed by what was evaluated.
pub type RecordedEvaluations = std::collections::HashMap<EvaluationKey, EvalSummary>;

/// The key of an evaluation: the candidate (its id and its files: two candidates may share files
/// and still measure differently), the purpose, and for a re-measurement during the search how
/// many the candidate had before it (0 otherwise).
pub fn evaluation_key(engine: &Engine, candidate_id: i64, sources: &[Source], purpose: Purpose) -> EvaluationKey {
    let earlier = match purpose {
        Purpose::Remeasure => engine.candidate(candidate_id).map_or(0, |c| c.remeasured.len()),
        Purpose::Search | Purpose::Final => 0,
    };
    (
        candidate_id,
        serde_json::to_string(sources).unwrap_or_default(),
        purpose,
        earlier,
    )
}

/// Reads a recorded run's evaluations from its event log.
pub fn recorded_evaluations(store: &RunStore) -> anyhow::Result<RecordedEvaluations> {
    let events = crate::drive::load_events(store)?;
    let mut engine = Engine::new();
    let mut out = RecordedEvaluations::new();
    for e in &events {
        if let Event::Evaluated {
            request_id, summary, ..
        } = e
        {
            if let Some(Request::Evaluate {
                candidate_id,
                sources,
                purpose,
                ..
            }) = engine.outstanding(request_id)
            {
                out.insert(
                    evaluation_key(&engine, *candidate_id, sources, *purpose),
                    summary.clone(),
                );
            }
        }
        engine
            .apply(e)
            .context("the recorded run's event log does not replay")?;
    }
    Ok(out)
}

/// Why the loop returned.
#[derive(Debug)]
pub enum Stopped {
    /// The engine finished the run (its `Finished` request, after the final re-measurement):
    /// the round budget is spent, or a fatal LLM failure (the budget spent, among others) ended
    /// the search early; the run's `stopped` record tells these apart.
    Finished {
        /// The best passing candidate's id; `None` when no candidate passed.
        best: Option<i64>,
        /// Why the engine ended the run, in words (the round budget is spent, ...).
        reason: String,
    },
    /// Ctrl-C: the requests in flight were finished and recorded, nothing new was served;
    /// `resume` continues the run.
    Interrupted,
    /// The LLM endpoint failed `failures` requests in a row (each after its own retries): the
    /// last one is kept unanswered, so `resume` asks it again once the endpoint works.
    LlmUnavailable {
        /// LLM requests that failed in a row when the loop stopped asking (at least 3).
        failures: u32,
        /// The last failure's error, in words.
        error: String,
    },
    /// The LLM endpoint refused the run's credentials (HTTP 401/403, a missing key): the request
    /// is kept unanswered, so `resume` asks it again once the key works.
    LlmRefused {
        /// The endpoint's refusal, in words.
        error: String,
    },
    /// The executor became unavailable (a Ray cluster that went away): every result that came
    /// back is recorded; the evaluations it left unjudged (`pending`: their candidates) stay
    /// unanswered, so `resume` evaluates them once the executor (or another) works.
    ExecutorUnavailable {
        /// Which executor went away, and why.
        unavailable: crate::executor::Unavailable,
        /// The ids of the candidates whose evaluations stay outstanding.
        pending: Vec<i64>,
    },
    /// Planner or coder requests wait for an external agent (agent mode): (id, role), oldest
    /// first. Nothing else is in flight.
    AwaitingAgent {
        /// The waiting requests: (request id, role: `planner` or `coder`).
        requests: Vec<(String, &'static str)>,
    },
    /// Evaluations wait for `ksearch evaluate` (a deferred run), or for the next one when this
    /// drive reached its `--max`: (request id, candidate id), oldest first. `agent` lists the
    /// requests that also wait for an agent. Nothing else is in flight.
    AwaitingEvaluation {
        /// The waiting evaluations: (request id, candidate id).
        evaluations: Vec<(String, i64)>,
        /// The requests that also wait for an agent: (request id, role).
        agent: Vec<(String, &'static str)>,
    },
}

impl Stopped {
    /// Why, as the run's `stopped` record says it, and what goes with it. `fatal` is the LLM
    /// failure that ended the search, if one did (`budget` when it was the budget).
    fn record(&self, fatal: Option<&(bool, String)>) -> (StopReason, String) {
        match self {
            Stopped::Finished { reason, .. } => match fatal {
                Some((true, error)) => (StopReason::Budget, error.clone()),
                Some((false, error)) => (StopReason::Fatal, error.clone()),
                None => (StopReason::Finished, reason.clone()),
            },
            Stopped::Interrupted => (
                StopReason::Interrupted,
                "stopped by Ctrl-C; `ksearch resume` continues it".into(),
            ),
            Stopped::LlmUnavailable { failures, error } => (
                StopReason::LlmUnavailable,
                format!("{failures} requests failed in a row, each after its retries; the last: {error}"),
            ),
            Stopped::LlmRefused { error } => (StopReason::LlmRefused, error.clone()),
            Stopped::ExecutorUnavailable { unavailable, pending } => (
                StopReason::ExecutorUnavailable,
                format!(
                    "{unavailable}; {} evaluation(s) it left unjudged stay pending; `ksearch resume` continues \
                     once it is back",
                    pending.len()
                ),
            ),
            Stopped::AwaitingAgent { .. } => (StopReason::AwaitingAgent, String::new()),
            Stopped::AwaitingEvaluation { evaluations, .. } => (
                StopReason::AwaitingEvaluation,
                format!(
                    "{} candidate(s) wait for `ksearch evaluate` on a machine with the task's device",
                    evaluations.len()
                ),
            ),
        }
    }
}

/// Records why driving the run stopped, in its metadata (`stopped`: reason, time, detail), so
/// that a report or the dashboard can tell a stopped run from a live one (docs/report.md).
/// Best effort: when the store cannot take it, the caller has a bigger error to report.
pub fn record_stop(store: &RunStore, reason: StopReason, detail: &str) {
    let _ = store.set_stop_record(&StopRecord::now(reason, detail));
}

/// `result`, after recording an error as the reason the run stopped (for failures before the
/// loop runs: a missing API key, no device).
pub fn stop_on_error<T>(store: &RunStore, result: anyhow::Result<T>) -> anyhow::Result<T> {
    if let Err(e) = &result {
        record_stop(store, StopReason::Error, &format!("{e:#}"));
    }
    result
}

/// How the loop serves one request.
enum Dispatch<'e> {
    /// Its answer is known at once.
    Ready(Box<Done>),
    /// An external agent answers it.
    Agent,
    /// A worker serves it.
    Llm {
        client: &'e LlmClient,
        messages: Vec<ksearch_llm::Message>,
        plan: bool,
        label: String,
    },
    Evaluate(Box<EvalJob>),
}

/// LLM requests failing in a row (each after the client's own retries with backoff) after which
/// the run stops instead of spending its rounds on an endpoint that is down; the last request
/// stays unanswered for `resume`.
pub(crate) const LLM_FAILURES_TO_STOP: u32 = 3;

/// What the loop's helpers share (everything but the engine, which the loop alone changes).
struct Shared<'e> {
    store: &'e RunStore,
    brains: &'e Brains,
    task: &'e Task,
    run_seed: u64,
    eval_template: &'e EvalOptions,
    recorded: Option<&'e RecordedEvaluations>,
    executor: &'e dyn Executor,
    profile: bool,
}

impl Driver<'_> {
    pub(crate) fn run(&mut self, rt: &tokio::runtime::Runtime) -> anyhow::Result<Stopped> {
        let cx = Shared {
            store: self.store,
            brains: &self.brains,
            task: self.task,
            run_seed: self.run_seed,
            eval_template: &self.eval_template,
            recorded: self.recorded.as_ref(),
            executor: self.executor,
            profile: self.profile,
        };
        let max_evaluations = self.max_evaluations;
        let evaluated = &mut self.evaluated;
        let mut progress = Progress::new(self.quiet);
        // A finished run stays as it ended (a resume of it serves nothing); any other is live
        // from here until the loop records why it stopped.
        let was_finished = matches!(self.engine.pending(), Some(Request::Finished { .. }));
        if !was_finished {
            self.store.clear_stop_record()?;
        }
        // The LLM failure that ended the search (fatal: a key, a model, the budget), if any, and
        // whether it was the budget.
        let mut fatal: Option<(bool, String)> = None;
        let engine = &mut self.engine;
        let stop = &self.stop;
        let max_in_flight = &mut self.max_in_flight;
        let handle = rt.handle();
        let stopped = std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<Done>();
            // Requests handed out and not yet recorded, and how many of them are on workers.
            let mut taken: HashSet<String> = HashSet::new();
            let mut running = 0usize;
            let mut ready: VecDeque<Done> = VecDeque::new();
            // LLM requests that failed in a row (after their retries), and the error that made
            // the run stop asking.
            let mut failing = 0u32;
            // Once tripped: the failures in a row and the error at that moment. Answers still in
            // flight are recorded; failures after it are held back like the one that tripped it.
            let mut unavailable: Option<(u32, String)> = None;
            // Set when the endpoint refused the credentials.
            let mut refused: Option<String> = None;
            // Set when the executor became unavailable (the first report of it).
            let mut lost_executor: Option<crate::executor::Unavailable> = None;
            // Evaluations started by this drive, and those left pending (deferred, or past --max).
            let mut started_evaluations = 0usize;
            loop {
                if let Some(done) = ready.pop_front() {
                    let id = done.request_id().to_string();
                    taken.remove(&id);
                    progress.finished(&id);
                    if let Some(u) = done.executor_unavailable() {
                        // Not answered, not recorded: the candidate was not judged (neither its
                        // failure nor an infrastructure one), and `resume` evaluates it again.
                        lost_executor.get_or_insert_with(|| u.clone());
                        continue;
                    }
                    if let Some(f) = done.auth_failure() {
                        // Not answered: a wrong key must not spend a round or close a node.
                        refused.get_or_insert(f.error.clone());
                        done.record_exchange_only(cx.store)?;
                        continue;
                    }
                    match done.llm_outcome() {
                        Some(Ok(())) => failing = 0,
                        Some(Err(error)) => {
                            failing += 1;
                            if failing >= LLM_FAILURES_TO_STOP || unavailable.is_some() {
                                // Kept in the store as an exchange, not answered: the engine
                                // would spend a round or give up a plan on an endpoint that is
                                // down, and `resume` asks this request again.
                                done.record_exchange_only(cx.store)?;
                                unavailable.get_or_insert((failing, error));
                                continue;
                            }
                        }
                        None => {}
                    }
                    if let Some(f) = done.fatal_llm_failure() {
                        fatal.get_or_insert((f.budget, f.error.clone()));
                    }
                    if let Some(c) = cx.record(engine, done, &progress)? {
                        evaluated.push(c);
                    }
                    continue;
                }
                let stopping = stop.load(Ordering::SeqCst)
                    || unavailable.is_some()
                    || refused.is_some()
                    || lost_executor.is_some();
                let mut agent: Vec<Request> = Vec::new();
                let mut pending: Vec<Request> = Vec::new();
                if !stopping {
                    let waiting: Vec<Request> = engine.in_flight().into_iter().cloned().collect();
                    for request in waiting {
                        let id = request.id().unwrap_or_default().to_string();
                        if taken.contains(&id) {
                            continue;
                        }
                        if running >= engine.parallel() {
                            break;
                        }
                        match cx.dispatch(engine, &request)? {
                            Dispatch::Ready(done) => {
                                taken.insert(id);
                                ready.push_back(*done);
                                // Applied before anything else is served, so a quick answerer
                                // (the tuner) sees the state its previous answer led to.
                                break;
                            }
                            Dispatch::Agent => agent.push(request),
                            Dispatch::Llm {
                                client,
                                messages,
                                plan,
                                label,
                            } => {
                                taken.insert(id.clone());
                                running += 1;
                                progress.started(&id, &label);
                                let tx = tx.clone();
                                scope.spawn(move || {
                                    let work = || {
                                        let (row, answer) = handle.block_on(call_llm(client, &id, messages));
                                        Done::Llm {
                                            request_id: id.clone(),
                                            plan,
                                            row: Box::new(row),
                                            answer,
                                        }
                                    };
                                    let _ = tx.send(guarded(&id, work));
                                });
                            }
                            Dispatch::Evaluate(job) => {
                                let capped = max_evaluations.is_some_and(|m| started_evaluations >= m);
                                if !cx.executor.evaluates() || capped {
                                    pending.push(request);
                                    continue;
                                }
                                started_evaluations += 1;
                                taken.insert(id.clone());
                                running += 1;
                                let (candidate_id, purpose) = (job.candidate_id, job.purpose);
                                progress.started(&id, &format!("evaluating candidate {candidate_id}"));
                                let tx = tx.clone();
                                let (task, executor) = (cx.task, cx.executor);
                                scope.spawn(move || {
                                    let work = || {
                                        let done = executor.evaluate(task, *job);
                                        Done::Evaluation {
                                            request_id: id.clone(),
                                            candidate_id,
                                            purpose,
                                            device: done.device,
                                            result: Box::new(done.result),
                                        }
                                    };
                                    let _ = tx.send(guarded(&id, work));
                                });
                            }
                        }
                    }
                    *max_in_flight = (*max_in_flight).max(running);
                    if !ready.is_empty() {
                        continue;
                    }
                }
                if running == 0 {
                    match engine.pending() {
                        Some(Request::Finished { best_candidate, reason }) => {
                            return Ok(Stopped::Finished {
                                best: *best_candidate,
                                reason: reason.clone(),
                            })
                        }
                        _ if refused.is_some() => {
                            return Ok(Stopped::LlmRefused {
                                error: refused.clone().unwrap_or_default(),
                            });
                        }
                        _ if unavailable.is_some() => {
                            let (failures, error) = unavailable.unwrap_or_default();
                            return Ok(Stopped::LlmUnavailable { failures, error });
                        }
                        _ if lost_executor.is_some() => {
                            let pending = engine
                                .in_flight()
                                .into_iter()
                                .filter_map(|r| match r {
                                    Request::Evaluate { candidate_id, .. } => Some(*candidate_id),
                                    _ => None,
                                })
                                .collect();
                            return Ok(Stopped::ExecutorUnavailable {
                                unavailable: lost_executor.clone().unwrap_or_else(|| crate::executor::Unavailable {
                                    what: "the executor".into(),
                                    why: "unknown".into(),
                                }),
                                pending,
                            });
                        }
                        _ if stopping => return Ok(Stopped::Interrupted),
                        _ if !pending.is_empty() => return cx.await_evaluation(&pending, &agent),
                        _ if !agent.is_empty() => return cx.await_agent(&agent),
                        _ => anyhow::bail!(
                            "the engine has nothing to do: the run's event log does not start with `started`"
                        ),
                    }
                }
                let done = rx.recv().context("a worker vanished without an answer")?;
                running -= 1;
                ready.push_back(done);
            }
        });
        progress.clear();
        if !was_finished {
            match &stopped {
                Ok(s) => {
                    let (reason, detail) = s.record(fatal.as_ref());
                    record_stop(self.store, reason, &detail);
                }
                Err(e) => record_stop(self.store, StopReason::Error, &format!("{e:#}")),
            }
        }
        stopped
    }
}

/// Runs a worker's job; a panic becomes a fatal failure of its request instead of a loop that
/// waits forever for an answer.
fn guarded(id: &str, work: impl FnOnce() -> Done) -> Done {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Done::Event(Event::RequestFailed {
            request_id: id.to_string(),
            error: "ksearch's worker serving this request crashed".into(),
            fatal: true,
        })
    })
}

impl<'e> Shared<'e> {
    /// How `request` will be served.
    fn dispatch(&self, engine: &Engine, request: &Request) -> anyhow::Result<Dispatch<'e>> {
        let id = request.id().unwrap_or_default().to_string();
        if matches!(request, Request::Plan { .. } | Request::Code { .. }) && self.brains.tuner.is_some() {
            return Ok(Dispatch::Ready(Box::new(self.tuner_answer(engine, request)?)));
        }
        Ok(match request.clone() {
            Request::Finished { .. } => anyhow::bail!("internal: the finished run has a request in flight"),
            Request::Plan { plan, messages, .. } => match &self.brains.planner {
                None => Dispatch::Agent,
                Some(client) => match answered_before(self.store, &id)? {
                    Some(text) => {
                        Dispatch::Ready(Box::new(Done::Event(Event::PlannerAnswered { request_id: id, text })))
                    }
                    None => Dispatch::Llm {
                        client,
                        messages,
                        plan: true,
                        label: format!("planner: {}", plan_label(&plan)),
                    },
                },
            },
            Request::Code {
                code,
                node_id,
                messages,
                ..
            } => match &self.brains.coder {
                None => Dispatch::Agent,
                Some(client) => match answered_before(self.store, &id)? {
                    Some(text) => Dispatch::Ready(Box::new(Done::Event(Event::CoderAnswered { request_id: id, text }))),
                    None => Dispatch::Llm {
                        client,
                        messages,
                        plan: false,
                        label: format!(
                            "coder: {} for {node_id} (round {})",
                            code.as_str(),
                            engine.round_of(&id).unwrap_or(engine.round())
                        ),
                    },
                },
            },
            Request::Evaluate {
                candidate_id,
                purpose,
                language,
                sources,
                ..
            } => {
                if let Some(summary) = self
                    .recorded
                    .and_then(|r| r.get(&evaluation_key(engine, candidate_id, &sources, purpose)))
                {
                    return Ok(Dispatch::Ready(Box::new(Done::Event(Event::Evaluated {
                        request_id: id,
                        candidate_id,
                        summary: summary.clone(),
                    }))));
                }
                self.record_candidate(engine, candidate_id, &language, &sources)?;
                match self.solution(engine, candidate_id, &language, &sources) {
                    Err(reason) => Dispatch::Ready(Box::new(Done::Event(Event::Evaluated {
                        request_id: id,
                        candidate_id,
                        summary: rejected(reason),
                    }))),
                    Ok(solution) => {
                        let mut opts = self.eval_template.clone();
                        // Every evaluation draws its own inputs, reproducibly from the run's seed
                        // (a re-measurement by how many the candidate had before it).
                        let again = match purpose {
                            Purpose::Remeasure => {
                                1 + engine.candidate(candidate_id).map_or(0, |c| c.remeasured.len() as u64)
                            }
                            Purpose::Search | Purpose::Final => 0,
                        };
                        opts.seed = self
                            .run_seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add((candidate_id as u64) << 1 | (purpose == Purpose::Final) as u64)
                            .wrapping_add(again << 40);
                        opts.fail_fast = purpose == Purpose::Search;
                        Dispatch::Evaluate(Box::new(EvalJob {
                            request_id: id,
                            candidate_id,
                            purpose,
                            solution,
                            opts,
                            profile: self.profile && purpose == Purpose::Search,
                        }))
                    }
                }
            }
        })
    }

    /// Records finished work and, if its request is still outstanding, appends the answering
    /// event and applies it; the rows and the event land in one transaction, so a kill between
    /// them cannot record an evaluation whose event is missing (and redo it). A request the
    /// engine no longer waits for (dropped by a fatal failure while it was in flight) leaves
    /// its rows (an LLM call still cost money) but no event. Returns the candidate evaluated,
    /// if the event was an evaluation.
    fn record(&self, engine: &mut Engine, done: Done, progress: &Progress) -> anyhow::Result<Option<i64>> {
        let id = done.request_id().to_string();
        let outstanding = engine.outstanding(&id).is_some();
        let event = self.store.transaction(|store| -> anyhow::Result<Event> {
            let event = done.record(store)?;
            if event_request_id(&event).is_none() {
                anyhow::bail!("internal: a worker answered with a `started` event");
            }
            if outstanding {
                let body = serde_json::to_value(&event).context("cannot encode an event")?;
                store.append_event(event.kind(), &body)?;
                // Shown as answered where it was left pending (deferred evaluations); most
                // requests have no row, which is no error.
                let _ = store.set_request_state(&id, ksearch_store::RequestState::Answered);
            }
            Ok(event)
        })?;
        if !outstanding {
            return Ok(None);
        }
        engine.apply(&event).context("the engine refused its own event")?;
        report(engine, &event, progress);
        Ok(match &event {
            Event::Evaluated { candidate_id, .. } => Some(*candidate_id),
            _ => None,
        })
    }

    /// The tuner's answer, recorded like an LLM exchange so the run's history is complete.
    fn tuner_answer(&self, engine: &Engine, request: &Request) -> anyhow::Result<Done> {
        let Some(tuner) = &self.brains.tuner else {
            anyhow::bail!("no tuner")
        };
        let id = request.id().unwrap_or_default().to_string();
        let answer = tuner.answer(engine, request);
        let row = Box::new(ExchangeRow {
            request_id: Some(id.clone()),
            role: request.role().to_string(),
            provider: "tuner".into(),
            model: "tuner".into(),
            answer: answer.as_ref().ok().map(|t| serde_json::json!({"text": t})),
            error: answer.as_ref().err().cloned(),
            attempts: 1,
            ..Default::default()
        });
        let event = match (answer, request) {
            (Ok(text), Request::Plan { .. }) => Event::PlannerAnswered { request_id: id, text },
            (Ok(text), _) => Event::CoderAnswered { request_id: id, text },
            (Err(error), _) => Event::RequestFailed {
                request_id: id,
                error,
                fatal: true,
            },
        };
        Ok(Done::Tuner { row, event })
    }

    /// Leaves the evaluations pending in the store (for `ksearch evaluate`; their candidates
    /// are recorded) and the agent's requests as [`Shared::await_agent`] does, and stops.
    fn await_evaluation(&self, evaluations: &[Request], agent: &[Request]) -> anyhow::Result<Stopped> {
        let mut out = Vec::new();
        for request in evaluations {
            let id = request.id().unwrap_or_default().to_string();
            let body = serde_json::to_value(request).context("cannot encode a request")?;
            self.store.put_request(&id, request.role(), &body)?;
            if let Request::Evaluate { candidate_id, .. } = request {
                out.push((id, *candidate_id));
            }
        }
        let agent = match self.await_agent(agent)? {
            Stopped::AwaitingAgent { requests } => requests,
            _ => Vec::new(),
        };
        Ok(Stopped::AwaitingEvaluation {
            evaluations: out,
            agent,
        })
    }

    /// Leaves the LLM requests pending in the store for an external agent and stops.
    fn await_agent(&self, requests: &[Request]) -> anyhow::Result<Stopped> {
        let mut out = Vec::new();
        for request in requests {
            let id = request.id().unwrap_or_default().to_string();
            let mut body = serde_json::to_value(request).context("cannot encode a request")?;
            body["answer_format"] = serde_json::json!(answer_format(request));
            self.store.put_request(&id, request.role(), &body)?;
            out.push((id, request.role()));
        }
        Ok(Stopped::AwaitingAgent { requests: out })
    }

    /// The candidate's row, before it is evaluated (a resumed run keeps the first one).
    fn record_candidate(
        &self,
        engine: &Engine,
        candidate_id: i64,
        language: &str,
        sources: &[Source],
    ) -> anyhow::Result<()> {
        let c = engine.candidate(candidate_id);
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
        Ok(())
    }

    /// The candidate as a solution of the task; `Err` says why it cannot be one.
    fn solution(
        &self,
        engine: &Engine,
        candidate_id: i64,
        language: &str,
        sources: &[Source],
    ) -> Result<Solution, String> {
        candidate_solution(self.task, engine, candidate_id, language, sources)
    }
}

/// Candidate `candidate_id` of a run of `task` (written in `language`, made of `sources`) as a
/// solution of the task, as the run evaluates it: its entry file and symbol, its language and
/// calling convention; `Err` says why it cannot be one.
pub fn candidate_solution(
    task: &ksearch_spec::Task,
    engine: &Engine,
    candidate_id: i64,
    language: &str,
    sources: &[Source],
) -> Result<Solution, String> {
    let entry = task.config.kernel.entry.clone().unwrap_or_else(|| "kernel".into());
    let default = engine.task().map(|t| t.default_file.clone()).unwrap_or_default();
    let entry_file = sources
        .iter()
        .find(|s| s.path == default)
        .or_else(|| sources.iter().find(|s| language_of(&s.path).is_some()))
        .or(sources.first())
        .map(|s| s.path.clone())
        .unwrap_or(default);
    // A candidate's language follows its entry file, so a task may take kernels in several
    // languages (a CUDA seed, a Triton template); the task's language is the fallback.
    let language = match language_of_in(&entry_file, task.config.kernel.language) {
        Some(l) => l,
        None => language.parse::<ksearch_spec::Language>().map_err(|e| {
            ksearch_spec::SpecError::one(format!("candidate {candidate_id}"), "spec.language", e.to_string())
                .to_string()
        })?,
    };
    let destination_passing_style = language.calling_style() == ksearch_spec::CallingStyle::DestinationPassing
        || task.config.kernel.calling == ksearch_spec::Calling::Dps;
    let solution = Solution {
        name: format!("candidate-{candidate_id}"),
        definition: task.definition.name.clone(),
        author: Some("ksearch".into()),
        spec: BuildSpec {
            language,
            target_hardware: vec![],
            entry_point: format!("{entry_file}::{entry}"),
            dependencies: vec![],
            destination_passing_style,
            binding: ksearch_spec::Binding::default_for(language),
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
        .validate(&format!("candidate {candidate_id}"), task)
        .map_err(|e| e.to_string())?;
    Ok(solution)
}

/// One line per evaluation: round, node, candidate, verdict, best so far.
fn report(engine: &Engine, event: &Event, progress: &Progress) {
    if let Event::Evaluated {
        candidate_id, summary, ..
    } = event
    {
        let c = engine.candidate(*candidate_id);
        // A final re-measurement is labelled as such, not as the round that produced it.
        let is_final = c.is_some_and(|c| c.final_result.as_ref() == Some(summary));
        let best = if is_final {
            // While the finalists are re-measured, the search's best is not the answer yet: the
            // line says the fastest re-measurement so far.
            engine
                .candidates()
                .iter()
                .filter_map(|c| {
                    c.final_result
                        .as_ref()
                        .filter(|r| r.passed())
                        .map(|r| (c.id, r.speedup))
                })
                .max_by(|a, b| a.1.unwrap_or(0.0).total_cmp(&b.1.unwrap_or(0.0)))
                .map(|(id, s)| format!("fastest re-measured {:.2}x (candidate {id})", s.unwrap_or(0.0)))
                .unwrap_or_else(|| "no finalist re-measured as passing yet".into())
        } else {
            engine
                .best()
                .map(|b| format!("best {:.2}x (candidate {})", b.speedup().unwrap_or(0.0), b.id))
                .unwrap_or_else(|| "no passing candidate yet".into())
        };
        let round = match c {
            Some(_) if is_final => "final".to_string(),
            Some(c) => c.round.to_string(),
            None => "-".to_string(),
        };
        let node = c.map(|c| c.node_id.as_str()).unwrap_or("-");
        progress.line(&format!(
            "round {round:>5}  node {node:<6} candidate {candidate_id:<4} {:<60}  {best}",
            ksearch_search::engine::verdict(summary)
                .chars()
                .take(60)
                .collect::<String>()
        ));
    }
}

/// What an answer to `request` must look like, in one sentence for the agent.
pub fn answer_format(request: &Request) -> &'static str {
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

fn plan_label(plan: &PlanKind) -> String {
    match plan {
        PlanKind::Init => "initial plan".into(),
        PlanKind::Propose => "propose actions".into(),
        PlanKind::Refine { node_id } => format!("refine after {node_id}"),
        PlanKind::TooHard { node_id } => format!("{node_id} was too hard"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_record_names_what_ended_the_drive() {
        // The reasons as the run's `stopped` record spells them.
        let spelled = |(reason, detail): (StopReason, String)| (reason.as_str().to_string(), detail);
        let finished = Stopped::Finished {
            best: None,
            reason: "the round budget (4) is spent".into(),
        };
        assert_eq!(
            spelled(finished.record(None)),
            ("finished".to_string(), "the round budget (4) is spent".to_string())
        );
        let budget = (true, "budget exhausted: dollars".to_string());
        assert_eq!(finished.record(Some(&budget)).0.as_str(), "budget");
        let key = (false, "openai: the server refused the API key".to_string());
        assert_eq!(
            spelled(finished.record(Some(&key))),
            ("fatal".to_string(), key.1.clone())
        );
        let down = Stopped::LlmUnavailable {
            failures: 3,
            error: "HTTP 503".into(),
        };
        let (reason, detail) = down.record(None);
        assert_eq!(reason.as_str(), "llm_unavailable");
        assert!(detail.starts_with("3 requests failed in a row") && detail.ends_with("HTTP 503"));
        assert_eq!(Stopped::Interrupted.record(None).0.as_str(), "interrupted");
    }
}
