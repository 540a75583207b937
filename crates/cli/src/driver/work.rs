//! What the driver's workers do, and what the driver does before and after them: an LLM call,
//! an evaluation on a leased device. Workers never touch the run store (the driver's loop is
//! its only writer); they hand back a [`Done`] with everything to record.

use crate::summary::summarize;
use ksearch_devices::{DeviceLocks, DevicePool};
use ksearch_eval::{evaluate, EvalError, EvalOptions, Evaluation};
use ksearch_llm::{ChatRequest, LlmClient, LlmError, Message};
use ksearch_search::engine::{EvalSummary, Event, Purpose};
use ksearch_spec::{Solution, Task};
use ksearch_store::{EvaluationRow, ExchangeRow, RunStore};

/// A request's outcome, for the driver's loop to record and turn into an event.
// `Event::Started` carries the whole task brief; a `Done` is made once per request and mostly
// travels boxed (`Dispatch::Ready`), so the size of that variant costs next to nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Done {
    /// Known without a worker: the tuner's answer, a recorded evaluation, an answer stored
    /// before a crash, a candidate that cannot be a solution, a crashed worker.
    Event(Event),
    /// An LLM call, with its exchange row (recorded whatever became of the request).
    Llm {
        request_id: String,
        plan: bool,
        row: Box<ExchangeRow>,
        answer: Result<String, LlmFailure>,
    },
    /// An evaluation, with the device it ran on.
    Evaluation {
        request_id: String,
        candidate_id: i64,
        purpose: Purpose,
        device: Leased,
        result: Box<Result<Evaluation, EvalError>>,
    },
}

/// Why an LLM call failed.
#[derive(Debug, Clone)]
pub(crate) struct LlmFailure {
    pub error: String,
    /// What retrying cannot fix (budget, key, model, configuration): ends the search.
    pub fatal: bool,
    /// The LLM budget is spent (a fatal failure the run's stop record names apart).
    pub budget: bool,
    /// The endpoint failed (HTTP 5xx or 429, timeout, connection) after the client's retries:
    /// a sign that it is down, unlike a refused request or an odd answer.
    pub endpoint: bool,
}

impl Done {
    /// The failure of an LLM call that ends the search, if this is one.
    pub(crate) fn fatal_llm_failure(&self) -> Option<&LlmFailure> {
        match self {
            Done::Llm { answer: Err(f), .. } if f.fatal => Some(f),
            _ => None,
        }
    }

    /// For an LLM call: `Ok` when it answered, `Err` with the error when the endpoint failed
    /// after its retries; `None` for anything else (no LLM call, a fatal failure, a refused
    /// request or an odd answer, which say nothing about whether the endpoint is up).
    pub(crate) fn llm_outcome(&self) -> Option<Result<(), String>> {
        match self {
            Done::Llm { answer: Ok(_), .. } => Some(Ok(())),
            Done::Llm { answer: Err(f), .. } if f.endpoint && !f.fatal => Some(Err(f.error.clone())),
            _ => None,
        }
    }

    /// Keeps an LLM call's exchange (its prompt, error and attempts) in the store without
    /// answering its request.
    pub(crate) fn record_exchange_only(self, store: &RunStore) -> anyhow::Result<()> {
        if let Done::Llm { row, .. } = self {
            store.record_exchange(&row)?;
        }
        Ok(())
    }

    pub(crate) fn request_id(&self) -> &str {
        match self {
            Done::Event(e) => event_request_id(e).unwrap_or(""),
            Done::Llm { request_id, .. } | Done::Evaluation { request_id, .. } => request_id,
        }
    }

    /// Writes what the work produced to the store and returns the event that answers its
    /// request.
    pub(crate) fn record(self, store: &RunStore) -> anyhow::Result<Event> {
        Ok(match self {
            Done::Event(e) => e,
            Done::Llm {
                request_id,
                plan,
                row,
                answer,
            } => {
                store.record_exchange(&row)?;
                match answer {
                    Ok(text) if plan => Event::PlannerAnswered { request_id, text },
                    Ok(text) => Event::CoderAnswered { request_id, text },
                    Err(LlmFailure { error, fatal, .. }) => Event::RequestFailed {
                        request_id,
                        error,
                        fatal,
                    },
                }
            }
            Done::Evaluation {
                request_id,
                candidate_id,
                purpose,
                device,
                result,
            } => match *result {
                Ok(evaluation) => {
                    let summary = summarize(&evaluation);
                    let mut record = serde_json::to_value(&evaluation).unwrap_or_default();
                    // The pool's name for the device (the record's provenance has the
                    // harness's view of it, `cuda:K` as this process numbers the GPUs), and the
                    // GPU's UUID, which names it whatever the numbering.
                    record["leased_device"] = serde_json::json!(device.label);
                    if let Some(uuid) = device.uuid {
                        record["leased_device_uuid"] = serde_json::json!(uuid);
                    }
                    store.add_evaluation(&EvaluationRow {
                        id: None,
                        candidate_id,
                        purpose: match purpose {
                            Purpose::Search => "search",
                            Purpose::Final => "final",
                        }
                        .into(),
                        status: summary.status.clone(),
                        speedup: summary.speedup,
                        record,
                    })?;
                    Event::Evaluated {
                        request_id,
                        candidate_id,
                        summary,
                    }
                }
                Err(EvalError::Task(p)) => Event::RequestFailed {
                    request_id,
                    error: format!("the task is unusable: {p}"),
                    fatal: true,
                },
                Err(e) => Event::RequestFailed {
                    request_id,
                    error: format!("the evaluator cannot run: {e}"),
                    fatal: true,
                },
            },
        })
    }
}

/// The request an event answers (`None` for `started`).
pub(crate) fn event_request_id(e: &Event) -> Option<&str> {
    match e {
        Event::Started { .. } => None,
        Event::PlannerAnswered { request_id, .. }
        | Event::CoderAnswered { request_id, .. }
        | Event::Evaluated { request_id, .. }
        | Event::RequestFailed { request_id, .. } => Some(request_id),
    }
}

/// The summary of a candidate that cannot even be made into a solution.
pub(crate) fn rejected(reason: String) -> EvalSummary {
    EvalSummary::failure("rejected", reason)
}

/// An answer recorded for `request_id` before a crash (never turned into an event): used as
/// is, so a resumed run does not pay for it twice.
pub(crate) fn answered_before(store: &RunStore, request_id: &str) -> anyhow::Result<Option<String>> {
    Ok(store
        .answer_for_request(request_id)?
        .and_then(|a| serde_json::from_value::<ksearch_llm::ChatResponse>(a).ok())
        .map(|r| r.text))
}

/// One LLM call (on a worker). `Err` when it failed: fatal for what retrying
/// cannot fix (keys, models, budgets, replay gaps).
pub(crate) async fn call_llm(
    client: &LlmClient,
    request_id: &str,
    messages: Vec<Message>,
) -> (ExchangeRow, Result<String, LlmFailure>) {
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
            row.attempts = e.attempts().unwrap_or(0);
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
            Err(LlmFailure {
                error: e.to_string(),
                fatal,
                budget: matches!(e, LlmError::Budget(_)),
                endpoint: e.is_transient(),
            })
        }
    };
    (row, outcome)
}

/// The device an evaluation ran on: the pool's label (`cuda:1`, `cpu:0`) and the GPU's UUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Leased {
    pub label: String,
    pub uuid: Option<String>,
}

/// The GPU an evaluation on `device` runs on, for a solution in `language`, as this process
/// numbers it (`cuda:K`); [`evaluate_on_device`] narrows the child to it with
/// `CUDA_VISIBLE_DEVICES` and then names it `cuda:0`. `None` keeps the backend's default: a CPU
/// slot, or a candidate whose backend cannot run on a GPU (a C kernel in a GPU task).
pub(crate) fn device_option(device: &ksearch_devices::Device, language: &str) -> Option<String> {
    let cuda = device.cuda_device()?;
    ksearch_eval::backend_for(language, Some(&cuda)).is_ok().then_some(cuda)
}

/// Where an evaluation on `device` runs, for a solution in `language`: the device to name
/// (`None`: the backend's default) and the child's extra environment. On a GPU the child sees
/// that GPU alone (`CUDA_VISIBLE_DEVICES=<uuid>`, whatever the numbering) and names it
/// `cuda:0`; MLX names no CUDA device (`mlx:gpu` is CUDA device 0 on Linux), so narrowing is
/// all it needs for the leased GPU to be the one it runs on.
pub(crate) fn placement(device: &ksearch_devices::Device, language: &str) -> (Option<String>, Vec<(String, String)>) {
    let env = device.env();
    match device_option(device, language) {
        Some(cuda) if env.is_empty() => (Some(cuda), env),
        Some(_) => (Some("cuda:0".to_string()), env),
        None if language == "mlx" && device.cuda_device().is_some() => (None, env),
        None => (None, Vec::new()),
    }
}

/// Evaluates a solution on a device of the pool (on a worker): waits for a device (first come,
/// first served within this process), locks it against other processes (two ksearch processes
/// timing on one GPU or CPU slot would spoil both; the user is told once whom it waits for),
/// points the evaluation at it, and frees it when done, whatever happens. Returns the device
/// and the evaluation.
pub(crate) fn evaluate_on_device(
    task: &Task,
    solution: &Solution,
    mut opts: EvalOptions,
    pool: &DevicePool,
) -> (Leased, Result<Evaluation, EvalError>) {
    let notify = |m: &str| eprintln!("ksearch: {m}");
    let lease = match pool.lease_locked(&DeviceLocks::from_env(), &notify) {
        Ok(lease) => lease,
        Err(e) => return (Leased::default(), Err(EvalError::Setup(e.to_string()))),
    };
    let (device, env) = placement(lease.device(), &solution.spec.language);
    if device.is_some() {
        opts.device = device;
    }
    opts.env = env;
    let result = evaluate(task, solution, &opts, &notify);
    let leased = Leased {
        label: lease.label(),
        uuid: lease.device().uuid.clone(),
    };
    (leased, result)
}

#[cfg(test)]
mod tests {
    use super::{device_option, placement};

    #[test]
    fn an_evaluation_is_told_its_gpu_as_this_process_numbers_it() {
        let text = "0, NVIDIA H200, GPU-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-bbbb, 143771 MiB\n";
        let all = ksearch_devices::parse_nvidia_smi(text).unwrap();
        // nvidia-smi's GPU 1 is this process's cuda:0 under CUDA_VISIBLE_DEVICES=1.
        let seen = ksearch_devices::apply_cuda_visible_devices(all.clone(), Some("1"));
        assert_eq!(device_option(&all[1], "python").as_deref(), Some("cuda:1"));
        assert_eq!(device_option(&seen[0], "python").as_deref(), Some("cuda:0"));
        assert_eq!(device_option(&all[1], "cuda").as_deref(), Some("cuda:1"));
        // A C kernel keeps its backend's default (the CPU), as does a CPU slot.
        assert_eq!(device_option(&all[1], "c"), None);
        assert_eq!(device_option(&ksearch_devices::cpu_slots(1)[0], "python"), None);
    }

    #[test]
    fn an_evaluation_on_a_leased_gpu_sees_that_gpu_alone_mlx_too() {
        let text = "0, NVIDIA H200, GPU-aaaa, 143771 MiB\n1, NVIDIA H200, GPU-bbbb, 143771 MiB\n";
        let all = ksearch_devices::parse_nvidia_smi(text).unwrap();
        let visible = vec![("CUDA_VISIBLE_DEVICES".to_string(), "GPU-bbbb".to_string())];
        assert_eq!(placement(&all[1], "cuda"), (Some("cuda:0".into()), visible.clone()));
        // MLX's `mlx:gpu` is CUDA device 0: narrowed to the leased GPU, that is the one it uses.
        assert_eq!(placement(&all[1], "mlx"), (None, visible));
        // A C kernel in a GPU task, and anything on a CPU slot, keep the default and environment.
        assert_eq!(placement(&all[1], "c"), (None, vec![]));
        assert_eq!(placement(&ksearch_devices::cpu_slots(1)[0], "mlx"), (None, vec![]));
    }
}
