//! `ksearch run`, `ksearch resume`, `ksearch evaluate` and `ksearch sync`: arguments and what
//! they print; the run itself is ksearch-run's.

use anyhow::{bail, Context};
use ksearch_devices::DeviceSpec;
use ksearch_llm::LlmConfig;
use ksearch_run::create::{create_run, NewRun, SearchSettings};
use ksearch_run::drive::{auto_parallel, drive, set_ray_cluster, DriveOptions, Drove};
use ksearch_run::executor::ray::{check_address, RayError, RaySettings};
use ksearch_run::executor::ExecutorKind;
use ksearch_run::open::{open_for, OpenRun};
use ksearch_run::{BrainSpec, Stopped};
use ksearch_search::engine::Strategy;
use ksearch_spec::Task;
use ksearch_store::{MetaKey, StopReason};
use serde_json::json;
use std::path::{Path, PathBuf};

pub(crate) use ksearch_run::drive::load_events;

/// The arguments of `ksearch run`.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// A built-in task name (see `ksearch tasks`) or a task folder.
    task: String,
    /// The model for both roles, as PROVIDER:MODEL (e.g. openai:gpt-5, anthropic:claude-sonnet-4-5,
    /// ollama:qwen2.5-coder); providers and keys are configured in ksearch.toml.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    llm: Option<String>,
    /// The planner's model, if it differs from --llm.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    planner_llm: Option<String>,
    /// The coder's model, if it differs from --llm.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    coder_llm: Option<String>,
    /// Another source of answers: `tuner` (the knob tuner: no LLM, the task's kernel template;
    /// the default when no LLM is configured), `agent` (an external coding agent answers through
    /// `ksearch agent next|submit` or `ksearch mcp`), or `replay:RUN_DIR` (a recorded run).
    #[arg(long, value_name = "BRAIN")]
    brain: Option<String>,
    /// Coder rounds (one answer and one evaluation each).
    #[arg(long, default_value_t = 20)]
    rounds: u32,
    /// Search strategy: world-model (the method), refine (iterative refinement of the best, no
    /// planner) or evolve (islands with a MAP-Elites archive, no planner).
    #[arg(long, default_value = "world-model")]
    strategy: String,
    /// Share of the rounds that sweeps of knobs annotated in written kernels may use
    /// (`#define BLOCK 128 // ksearch: knob values=[64, 128, 256]`; world-model strategy; 0: off).
    #[arg(long, default_value_t = 0.25, value_name = "SHARE")]
    knob_share: f64,
    /// How often the run's best may be measured again when a challenger reads faster than it
    /// beyond the challenger's own noise but within the best's (docs/engine.md, "Re-measuring a
    /// noisy best"); 0: never. Re-measurements depend on measured noise, so two runs of one
    /// search can differ in them.
    #[arg(long, default_value_t = 2, value_name = "N")]
    remeasure: u32,
    /// What the prompts cite from the knowledge base: `none`, `hardware` (the target's figures)
    /// or `full` (figures, patterns, the translation layer into the target, properties to keep,
    /// and the task's expertise); the published three-configuration comparison.
    #[arg(long, default_value = "full", value_name = "LEVEL")]
    context: ksearch_kb::ContextLevel,
    /// Requests served at once: LLM calls and evaluations overlap, and `evolve` works on up to N
    /// islands at once (world-model and refine stay one step at a time but for the final
    /// re-measurement). Evaluations still take one device each (--devices).
    /// `auto`: as many as the executor evaluates at once (a Ray cluster's GPUs, or CPUs for a C
    /// task; the local devices).
    #[arg(long, default_value = "1", value_name = "N|auto")]
    parallel: String,
    /// Devices evaluations run on, one evaluation per device at a time: GPU indices as
    /// nvidia-smi numbers them (`0,1`) or UUIDs, `all`, `cpu` or `cpu:N` (N CPU kernels at
    /// once). Default: every visible GPU for GPU tasks (CUDA_VISIBLE_DEVICES is respected), one
    /// CPU slot for C tasks.
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    /// The run directory (default: runs/TASK-DATE-TIME).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of every evaluation's input generator (default: a fresh one, recorded in the run).
    #[arg(long)]
    seed: Option<u64>,
    /// Where candidates are evaluated: `local` (this machine's devices) or `deferred` (recorded as
    /// pending; `ksearch evaluate RUN_DIR` evaluates them, here or on another machine), or `ray`
    /// (the nodes of a Ray cluster: --ray-address; docs/ray.md).
    #[arg(long, default_value = "local", value_name = "EXECUTOR")]
    executor: ExecutorKind,
    /// The Ray cluster of `--executor ray` (`HOST:PORT` of its head, or `ray://HOST:10001`);
    /// default: RAY_ADDRESS.
    #[arg(long, value_name = "ADDR")]
    ray_address: Option<String>,
    /// The ksearch binary on the Ray nodes (the same version as this one).
    #[arg(long, value_name = "PATH", default_value = "ksearch")]
    ray_ksearch: String,
    /// The model behind an agent-mode run, as it should be credited (e.g. "claude-opus-4-5,
    /// agent mode via a coding agent"); recorded in the run and shown by `ksearch show`.
    #[arg(long, value_name = "TEXT")]
    agent_model: Option<String>,
    /// Profile every passing candidate with Nsight Compute where `ncu` is found (GPU
    /// backends): throughputs against peak, occupancy, warp stalls, L2 hits and tensor pipes go
    /// to the planner and coder with the candidate's other evidence (about 10 s a candidate).
    #[arg(long)]
    profile: bool,
    /// Print one JSON object at the end instead of a summary.
    #[arg(long)]
    json: bool,
}

/// The arguments of `ksearch evaluate`.
#[derive(clap::Args)]
pub(crate) struct EvaluateArgs {
    /// The run directory (a copy of it is fine: see `ksearch sync`).
    run_dir: PathBuf,
    /// Evaluate at most N pending candidates, then stop.
    #[arg(long, value_name = "N")]
    max: Option<usize>,
    /// Devices to evaluate on (as for `ksearch run`; default: every visible GPU for GPU tasks).
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    #[arg(long)]
    json: bool,
}

/// The arguments of `ksearch sync`.
#[derive(clap::Args)]
pub(crate) struct SyncArgs {
    /// A copy of the run that was continued elsewhere (e.g. evaluated on a GPU machine).
    from: PathBuf,
    /// The run it was copied from; it takes the copy's progress when the copy extends it.
    into: PathBuf,
    #[arg(long)]
    json: bool,
}

/// The arguments of `ksearch resume`.
#[derive(clap::Args)]
pub(crate) struct ResumeArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Devices to evaluate on from now on (as for `ksearch run`; default: the run's choice).
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    /// Where this drive evaluates: `local`, `deferred` or `ray` (default: the run's executor).
    /// `--executor local` goes on here when the run's Ray cluster is gone.
    #[arg(long, value_name = "EXECUTOR")]
    executor: Option<ExecutorKind>,
    /// The run's Ray cluster is now at ADDR (`HOST:PORT` of its head, or `ray://HOST:10001`):
    /// recorded in the run, so later resumes go there too. For runs evaluating with `ray` (or
    /// this drive, with `--executor ray`).
    #[arg(long, value_name = "ADDR")]
    ray_address: Option<String>,
    /// With --ray-address: the ksearch binary on the new cluster's nodes (default: the one the
    /// run recorded).
    #[arg(long, value_name = "PATH", requires = "ray_address")]
    ray_ksearch: Option<String>,
    /// Raise the run's round budget to N (above the one it has) and go on: a running run spends
    /// the new budget; a run its budget ended goes on from where that ended it and makes its
    /// final re-measurement again at the new end. Refused, changing nothing, while the final
    /// re-measurement is out or for a run that ended for another reason.
    #[arg(long, value_name = "N")]
    rounds: Option<u32>,
    #[arg(long)]
    json: bool,
}

/// `ksearch run`: creates the run directory, drives the run and prints how the drive ended;
/// returns the exit status.
pub(crate) fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let strategy: Strategy = args
        .strategy
        .parse()
        .map_err(|e| anyhow::anyhow!("--strategy {}: {e}", args.strategy))?;
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.knob_share) {
        bail!(
            "--knob-share {}: expected a share of the rounds between 0 and 1",
            args.knob_share
        );
    }
    if let Some(d) = &args.devices {
        d.parse::<DeviceSpec>()?;
    }
    let ray = match (
        args.executor,
        args.ray_address.clone().or_else(|| std::env::var("RAY_ADDRESS").ok()),
    ) {
        (ExecutorKind::Ray, Some(address)) => {
            // A wrong address fails here, before a run directory is created.
            check_address(&address)?;
            Some(RaySettings {
                address,
                ksearch: args.ray_ksearch.clone(),
            })
        }
        (ExecutorKind::Ray, None) => return Err(RayError::NoAddress.into()),
        _ if args.ray_address.is_some() => bail!("--ray-address goes with --executor ray"),
        _ => None,
    };
    let task = Task::load(&args.task)?;
    let parallel: u32 = match args.parallel.as_str() {
        "auto" => auto_parallel(&task, args.executor, ray.as_ref(), args.devices.as_deref())?,
        n => match n.parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => n,
            _ => bail!("--parallel {n}: expected 1 to 256 requests at once, or `auto`"),
        },
    };
    let llm_config = LlmConfig::load(Path::new("."))?;
    let brain = match args.brain.as_deref() {
        Some("agent") => BrainSpec::Agent,
        Some("tuner") => BrainSpec::Tuner,
        Some(b) => match b.strip_prefix("replay:") {
            Some(dir) => BrainSpec::from_args(&llm_config, None, None, None, Some(&PathBuf::from(dir)))?,
            None => bail!("--brain {b}: expected `tuner`, `agent` or `replay:RUN_DIR`"),
        },
        None => {
            let llm_given = args.llm.is_some() || args.planner_llm.is_some() || args.coder_llm.is_some();
            let llm_configured = llm_config.roles.planner.is_some() || llm_config.roles.coder.is_some();
            if !llm_given && !llm_configured && task.template.is_some() {
                // No LLM anywhere: the knob tuner is the brain that needs none.
                if !args.json {
                    eprintln!("no LLM configured (--llm or [roles] in ksearch.toml): searching with the knob tuner");
                }
                BrainSpec::Tuner
            } else {
                BrainSpec::from_args(
                    &llm_config,
                    args.llm.as_deref(),
                    args.planner_llm.as_deref(),
                    args.coder_llm.as_deref(),
                    None,
                )?
            }
        }
    };
    if args.agent_model.is_some() && brain != BrainSpec::Agent {
        bail!("--agent-model names the model behind an agent: it goes with --brain agent");
    }
    let NewRun { run, run_seed } = create_run(
        &args.task,
        &task,
        &brain,
        SearchSettings {
            rounds: args.rounds,
            strategy,
            knob_share: args.knob_share,
            remeasure: args.remeasure,
            context: args.context,
            parallel,
            devices: args.devices.clone(),
            executor: args.executor,
            ray,
            brain_note: args.agent_model.clone(),
            profile: args.profile,
        },
        args.out.clone(),
        args.seed,
    )?;
    let run_dir = run.dir.clone();
    if args.json {
        // Scripts learn the directory before anything long happens.
        eprintln!("run directory: {}", run_dir.display());
    } else {
        println!("run directory: {}", run_dir.display());
        let at_once = if parallel > 1 {
            format!(", up to {parallel} requests at once")
        } else {
            String::new()
        };
        let deferred = if args.executor == ExecutorKind::Deferred {
            ", evaluations deferred to `ksearch evaluate`"
        } else {
            ""
        };
        eprintln!(
            "searching {} with {} for {} rounds (seed {run_seed}{at_once}{deferred})",
            task.definition.name,
            brain.describe(),
            args.rounds
        );
    }
    print_drive(&run, &llm_config, &DriveOptions::default(), args.json)
}

/// `ksearch resume`: drives an existing run on from where it stopped and prints how the drive
/// ended; returns the exit status.
pub(crate) fn resume(args: &ResumeArgs) -> anyhow::Result<u8> {
    let run = open_for(&args.run_dir, "resume")?;
    let llm_config = LlmConfig::load(Path::new("."))?;
    if let Some(d) = &args.devices {
        d.parse::<DeviceSpec>()?;
        run.store.set_meta(MetaKey::Devices, &json!(d))?;
    }
    if let Some(address) = &args.ray_address {
        let kind = args.executor.unwrap_or(run.executor);
        set_ray_cluster(&run, kind, address, args.ray_ksearch.as_deref())?;
    }
    if let Some(rounds) = args.rounds {
        let raised = ksearch_run::budget::raise_budget(&run, rounds)
            .with_context(|| format!("{}: --rounds {rounds}", args.run_dir.display()))?;
        if !args.json {
            eprintln!("round budget raised from {} to {}", raised.from, raised.to);
        }
    }
    if !args.json {
        eprintln!("resuming {} with {}", args.run_dir.display(), run.brain.describe());
    }
    let opts = DriveOptions {
        executor: args.executor,
        ..DriveOptions::default()
    };
    print_drive(&run, &llm_config, &opts, args.json)
}

/// `ksearch evaluate`: the run's pending candidates, evaluated here; an in-process brain goes on
/// from their results.
pub(crate) fn evaluate(args: &EvaluateArgs) -> anyhow::Result<u8> {
    if args.max == Some(0) {
        bail!("--max must be at least 1");
    }
    let run = open_for(&args.run_dir, "evaluate")?;
    let llm_config = LlmConfig::load(Path::new("."))?;
    if let Some(d) = &args.devices {
        d.parse::<DeviceSpec>()?;
        run.store.set_meta(MetaKey::Devices, &json!(d))?;
    }
    let opts = DriveOptions {
        quiet: false,
        executor: Some(ExecutorKind::Local),
        max_evaluations: args.max,
        require_device: true,
    };
    let started = std::time::Instant::now();
    let drove = drive(&run, &llm_config, &opts)?;
    let mut out = outcome(&run.dir, &drove);
    out.json["evaluated"] = json!(drove.evaluated);
    out.json["evaluate_seconds"] = json!(started.elapsed().as_secs_f64());
    let list: Vec<String> = drove.evaluated.iter().map(|c| c.to_string()).collect();
    out.text = format!(
        "evaluated {} candidate(s){} in {:.1} s\n{}",
        drove.evaluated.len(),
        if list.is_empty() {
            String::new()
        } else {
            format!(" ({})", list.join(", "))
        },
        started.elapsed().as_secs_f64(),
        out.text
    );
    print(&out, args.json)
}

/// `ksearch sync FROM INTO`.
pub(crate) fn sync(args: &SyncArgs) -> anyhow::Result<u8> {
    let synced = ksearch_run::sync::fast_forward(&args.from, &args.into)?;
    let (json, text) = match synced {
        ksearch_run::sync::Synced::UpToDate => (
            json!({"status": "up_to_date"}),
            format!("{} is up to date with {}", args.into.display(), args.from.display()),
        ),
        ksearch_run::sync::Synced::FastForwarded { new_events } => (
            json!({"status": "fast_forwarded", "new_events": new_events}),
            format!(
                "{} took {new_events} new event(s) from {}; continue with: ksearch resume {} (or agent next)",
                args.into.display(),
                args.from.display(),
                args.into.display()
            ),
        ),
    };
    print(&Outcome { json, text, exit: 0 }, args.json)
}

/// How a stretch of driving ended: for the user (text), for scripts and MCP clients (JSON), and
/// the exit status.
pub(crate) struct Outcome {
    /// What `--json` prints.
    pub json: serde_json::Value,
    /// What is printed without `--json`.
    pub text: String,
    /// The exit status.
    pub exit: u8,
}

fn print(outcome: &Outcome, json_out: bool) -> anyhow::Result<u8> {
    if json_out {
        println!("{}", outcome.json);
    } else {
        println!("{}", outcome.text);
    }
    Ok(outcome.exit)
}

/// Drives the run and prints the outcome (text, or JSON with `json_out`).
pub(crate) fn print_drive(
    run: &OpenRun,
    llm_config: &LlmConfig,
    opts: &DriveOptions,
    json_out: bool,
) -> anyhow::Result<u8> {
    let opts = DriveOptions {
        quiet: opts.quiet || json_out,
        ..opts.clone()
    };
    let drove = drive(run, llm_config, &opts)?;
    print(&outcome(&run.dir, &drove), json_out)
}

/// What a drive's end means to the user. The JSON `status` of a drive that stopped is spelled as
/// the run's stop reasons ([`StopReason`]) rather than with strings of its own.
pub(crate) fn outcome(run_dir: &Path, drove: &Drove) -> Outcome {
    let engine = &drove.engine;
    let max_in_flight = drove.max_in_flight;
    let dir = run_dir.display();
    let agent_lines = |requests: &[(String, &'static str)]| -> String {
        if requests.len() > 1 {
            let list: Vec<String> = requests.iter().map(|(id, role)| format!("{id} ({role})")).collect();
            format!(
                "waiting for the agent to answer {} requests: {}\n  read them: ksearch agent next {dir}\n  \
                 answer one: ksearch agent submit {dir} REQUEST_ID ANSWER_FILE",
                requests.len(),
                list.join(", ")
            )
        } else {
            let (id, role) = requests.first().cloned().unwrap_or_default();
            format!(
                "waiting for the agent to answer request {id} ({role})\n  read it:   ksearch agent next {dir}\n  \
                 answer it: ksearch agent submit {dir} {id} ANSWER_FILE"
            )
        }
    };
    match &drove.stopped {
        Stopped::AwaitingAgent { requests } => {
            let (id, role) = requests.first().cloned().unwrap_or_default();
            let mut json = json!({
                "run_dir": run_dir, "status": StopReason::AwaitingAgent.as_str(), "request_id": id, "role": role,
            });
            if requests.len() > 1 {
                // Several at once (a parallel run): every one is listed; the first keeps the
                // fields a one-at-a-time client reads.
                json["requests"] = requests
                    .iter()
                    .map(|(id, role)| json!({"id": id, "role": role}))
                    .collect();
            }
            Outcome {
                json,
                text: agent_lines(requests),
                exit: 0,
            }
        }
        Stopped::AwaitingEvaluation { evaluations, agent } => {
            let ids: Vec<String> = evaluations.iter().map(|(_, c)| c.to_string()).collect();
            let mut text = format!(
                "{} candidate(s) wait to be evaluated ({}): on a machine with the task's device, run\n  \
                 ksearch evaluate {dir}",
                evaluations.len(),
                ids.join(", ")
            );
            if !agent.is_empty() {
                text.push_str(&format!("\nmeanwhile, {}", agent_lines(agent)));
            }
            Outcome {
                json: json!({
                    "run_dir": run_dir, "status": StopReason::AwaitingEvaluation.as_str(),
                    "pending": evaluations.iter().map(|(id, c)| json!({"request_id": id, "candidate": c})).collect::<Vec<_>>(),
                    "requests": agent.iter().map(|(id, role)| json!({"id": id, "role": role})).collect::<Vec<_>>(),
                }),
                text,
                exit: 0,
            }
        }
        Stopped::Interrupted => Outcome {
            json: json!({"run_dir": run_dir, "status": StopReason::Interrupted.as_str()}),
            text: format!("stopped; continue with: ksearch resume {dir}"),
            exit: crate::EXIT_FAILED,
        },
        Stopped::LlmUnavailable { failures, error } => Outcome {
            json: json!({
                "run_dir": run_dir, "status": StopReason::LlmUnavailable.as_str(), "failures": failures, "error": error,
            }),
            text: format!(
                "stopped: the LLM endpoint failed {failures} requests in a row, each after its retries; the last error:\n  \
                 {error}\nnothing is lost (the last request is kept unanswered); once the endpoint answers again, \
                 continue with: ksearch resume {dir}"
            ),
            exit: crate::EXIT_FAILED,
        },
        Stopped::LlmRefused { error } => Outcome {
            json: json!({"run_dir": run_dir, "status": StopReason::LlmRefused.as_str(), "error": error}),
            text: format!(
                "stopped: the LLM endpoint refused the credentials:\n  {error}\nnothing is lost (the request is kept \
                 unanswered); fix the key (or the provider's settings), then continue with: ksearch resume {dir}"
            ),
            exit: crate::EXIT_FAILED,
        },
        Stopped::ExecutorUnavailable { unavailable, pending } => {
            let ids: Vec<String> = pending.iter().map(|c| c.to_string()).collect();
            let text = format!(
                "stopped: {unavailable}\nnothing is lost: every result that came back is recorded, and the {} \
                 evaluation(s) in flight ({}) stay pending, judged neither as the candidates' failures nor as \
                 infrastructure failures; once it is back, continue with: ksearch resume {dir}\n(or on a cluster \
                 at another address: ksearch resume {dir} --ray-address ADDR; or evaluate on this machine \
                 instead: ksearch resume {dir} --executor local)",
                pending.len(),
                match ids.len() {
                    0 => "none".to_string(),
                    1 => format!("candidate {}", ids[0]),
                    _ => format!("candidates {}", ids.join(", ")),
                },
            );
            Outcome {
                json: json!({
                    "run_dir": run_dir, "status": StopReason::ExecutorUnavailable.as_str(),
                    "executor": unavailable.what, "error": unavailable.why, "pending": pending,
                    "message": text,
                }),
                text,
                exit: crate::EXIT_FAILED,
            }
        }
        Stopped::Finished { reason, .. } => {
            let best = drove.best();
            let speedup = best.and_then(|(_, s)| s);
            let seed_speedup = engine.candidates().first().and_then(|c| c.speedup());
            let mut text = format!("finished: {reason}\n");
            match (best, speedup, &drove.best_file) {
                (Some((b, _)), Some(s), Some(path)) => {
                    let vs_seed = seed_speedup
                        .map(|seed| format!(", {:.2}x the seed", s / seed))
                        .unwrap_or_default();
                    text.push_str(&format!(
                        "best: candidate {} at {s:.2}x the reference{vs_seed} (re-measured); written to {}\n",
                        b.id,
                        path.display()
                    ));
                }
                _ => text.push_str("no candidate passed\n"),
            }
            let report = match &drove.report {
                Some(Ok(path)) => {
                    text.push_str(&format!(
                        "report (charts, the tree, the best kernel against the seed): {}\n\
                         see the tree and every attempt in the terminal with: ksearch show {dir}",
                        path.display()
                    ));
                    Some(path.clone())
                }
                Some(Err(e)) => {
                    text.push_str(&format!(
                        "the HTML report could not be written ({e}); try: ksearch report {dir}\n\
                         see the tree and every attempt with: ksearch show {dir}"
                    ));
                    None
                }
                None => None,
            };
            Outcome {
                json: json!({
                    "run_dir": run_dir, "status": StopReason::Finished.as_str(), "reason": reason,
                    "best_candidate": best.map(|(b, _)| b.id), "best_speedup": speedup,
                    "seed_speedup": seed_speedup, "best_files": drove.best_file, "report": report, "rounds": engine.round(),
                    "max_in_flight": max_in_flight,
                }),
                text,
                exit: if best.is_some() { crate::EXIT_SUCCESS } else { crate::EXIT_FAILED },
            }
        }
    }
}
