//! `ksearch run` and `ksearch resume`.

use crate::brains::BrainSpec;
use crate::driver::{Driver, Stopped};
use anyhow::{bail, Context};
use ksearch_devices::{DevicePool, DeviceSpec};
use ksearch_eval::EvalOptions;
use ksearch_llm::LlmConfig;
use ksearch_search::engine::{Engine, EngineConfig, Event, Strategy};
use ksearch_spec::Task;
use ksearch_store::RunStore;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// What the prompts cite from the knowledge base: `none`, `hardware` (the target's figures)
    /// or `full` (figures, patterns, the translation layer into the target, properties to keep,
    /// and the task's expertise); the published three-configuration comparison.
    #[arg(long, default_value = "full", value_name = "LEVEL")]
    context: ksearch_kb::ContextLevel,
    /// Requests served at once: LLM calls and evaluations overlap, and `evolve` works on up to N
    /// islands at once (world-model and refine stay one step at a time but for the final
    /// re-measurement). Evaluations still take one device each (--devices).
    #[arg(long, default_value_t = 1, value_name = "N")]
    parallel: u32,
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
    /// Print one JSON object at the end instead of a summary.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub(crate) struct ResumeArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Devices to evaluate on from now on (as for `ksearch run`; default: the run's choice).
    #[arg(long, value_name = "LIST")]
    devices: Option<String>,
    #[arg(long)]
    json: bool,
}

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
    if !(1..=256).contains(&args.parallel) {
        bail!("--parallel {}: expected 1 to 256 requests at once", args.parallel);
    }
    if let Some(d) = &args.devices {
        d.parse::<DeviceSpec>()?;
    }
    let task = Task::load(&args.task)?;
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
    let NewRun {
        run_dir,
        store,
        run_seed,
    } = create_run(
        &args.task,
        &task,
        &brain,
        SearchSettings {
            rounds: args.rounds,
            strategy,
            knob_share: args.knob_share,
            context: args.context,
            parallel: args.parallel,
            devices: args.devices.clone(),
        },
        args.out.clone(),
        args.seed,
    )?;
    if args.json {
        // Scripts learn the directory before anything long happens.
        eprintln!("run directory: {}", run_dir.display());
    } else {
        println!("run directory: {}", run_dir.display());
        let at_once = if args.parallel > 1 {
            format!(", up to {} requests at once", args.parallel)
        } else {
            String::new()
        };
        eprintln!(
            "searching {} with {} for {} rounds (seed {run_seed}{at_once})",
            task.definition.name,
            brain.describe(),
            args.rounds
        );
    }
    drive(&run_dir, store, &task, &brain, &llm_config, args.json)
}

/// The engine settings a run is created with.
pub(crate) struct SearchSettings {
    pub rounds: u32,
    pub strategy: Strategy,
    pub knob_share: f64,
    /// What the prompts cite from the knowledge base (`--context`).
    pub context: ksearch_kb::ContextLevel,
    /// Requests served at once (`EngineConfig::parallel`).
    pub parallel: u32,
    /// `--devices` as given (checked), recorded so `resume` uses the same devices.
    pub devices: Option<String>,
}

/// A run directory just created, its store, and the seed of its evaluations.
pub(crate) struct NewRun {
    pub run_dir: PathBuf,
    pub store: RunStore,
    pub run_seed: u64,
}

/// Creates the run directory (`out`, or `runs/TASK-DATE-TIME`) and its store, records what the
/// run needs to be resumed (task, brain, seed, version) and appends the `started` event. Prints
/// nothing. `task_arg` is the task as the user gave it (a built-in name or a folder).
pub(crate) fn create_run(
    task_arg: &str,
    task: &Task,
    brain: &BrainSpec,
    settings: SearchSettings,
    out: Option<PathBuf>,
    seed: Option<u64>,
) -> anyhow::Result<NewRun> {
    let run_dir = out.unwrap_or_else(|| default_run_dir(&task.definition.name));
    // Written under a temporary name until the `started` event is in: a kill before that leaves
    // no half-made run for `resume` to trip on.
    let store = RunStore::create_staged(&run_dir)?;
    let run_seed = seed.unwrap_or_else(crate::eval_cmd::fresh_seed);
    // The task argument is kept as given for built-ins, absolute for folders, so resume finds it.
    let recorded_task = match Path::new(task_arg).canonicalize() {
        Ok(p) if Path::new(task_arg).exists() => p.display().to_string(),
        _ => task_arg.to_string(),
    };
    store.set_meta("task", &json!(recorded_task))?;
    store.set_meta("brain", &serde_json::to_value(brain)?)?;
    store.set_meta("run_seed", &json!(run_seed))?;
    store.set_meta("ksearch_version", &json!(env!("CARGO_PKG_VERSION")))?;
    if let Some(devices) = &settings.devices {
        store.set_meta("devices", &json!(devices))?;
    }
    let config = EngineConfig {
        rounds: settings.rounds,
        strategy: settings.strategy,
        parallel: settings.parallel.max(1),
        rng_seed: run_seed,
        // The tuner's kernels come from its template; sweeps are for written kernels.
        knob_share: if *brain == BrainSpec::Tuner {
            0.0
        } else {
            settings.knob_share
        },
        ..EngineConfig::default()
    };
    let kb = crate::knowledge::kb()?;
    store.set_meta("context", &json!(settings.context.to_string()))?;
    let mut brief = crate::knowledge::brief(&kb, task, settings.context)?;
    if *brain == BrainSpec::Tuner {
        // The tuner starts from its template's all-defaults configuration.
        let tuner = crate::knowledge::tuner(task)?;
        brief.default_file = tuner.file().to_string();
        brief.seed = Some(vec![ksearch_search::engine::Source {
            path: tuner.file().to_string(),
            content: tuner.seed().map_err(anyhow::Error::msg)?,
        }]);
    }
    let started = Event::Started { task: brief, config };
    store.append_event(started.kind(), &serde_json::to_value(&started)?)?;
    let store = store.publish()?;
    Ok(NewRun {
        run_dir,
        store,
        run_seed,
    })
}

pub(crate) fn resume(args: &ResumeArgs) -> anyhow::Result<u8> {
    let store = RunStore::open(&args.run_dir)?;
    let task_arg: String = serde_json::from_value(store.meta("task")?.context("the run has no recorded task")?)?;
    let task = Task::load(&task_arg).with_context(|| format!("the run's task '{task_arg}'"))?;
    let brain: BrainSpec = serde_json::from_value(store.meta("brain")?.context("the run has no recorded brain")?)
        .context("the run's recorded brain is unreadable")?;
    let llm_config = LlmConfig::load(Path::new("."))?;
    if let Some(d) = &args.devices {
        d.parse::<DeviceSpec>()?;
        store.set_meta("devices", &json!(d))?;
    }
    if !args.json {
        eprintln!("resuming {} with {}", args.run_dir.display(), brain.describe());
    }
    drive(&args.run_dir, store, &task, &brain, &llm_config, args.json)
}

/// How a stretch of driving ended: for the user (text), for scripts and MCP clients (JSON), and
/// the exit status.
pub(crate) struct Outcome {
    pub json: serde_json::Value,
    pub text: String,
    pub exit: u8,
}

/// Drives the run and prints the outcome (text, or JSON with `json_out`).
pub(crate) fn drive(
    run_dir: &Path,
    store: RunStore,
    task: &Task,
    brain: &BrainSpec,
    llm_config: &LlmConfig,
    json_out: bool,
) -> anyhow::Result<u8> {
    let outcome = drive_quietly(run_dir, store, task, brain, llm_config, json_out)?;
    if json_out {
        println!("{}", outcome.json);
    } else {
        println!("{}", outcome.text);
    }
    Ok(outcome.exit)
}

/// Drives the run until it finishes, waits for an agent, or is interrupted; prints nothing on
/// stdout (progress goes to stderr unless `quiet`).
pub(crate) fn drive_quietly(
    run_dir: &Path,
    store: RunStore,
    task: &Task,
    brain: &BrainSpec,
    llm_config: &LlmConfig,
    quiet: bool,
) -> anyhow::Result<Outcome> {
    let events = load_events(&store)?;
    let engine = Engine::replay(&events).context("the run's event log does not replay")?;
    // Failures before the loop runs are recorded as the run's stop too (the loop records its own).
    let brains = crate::driver::stop_on_error(&store, brain.build(llm_config, &store, task))?;
    let run_seed: u64 = serde_json::from_value(store.meta("run_seed")?.unwrap_or(json!(0)))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    rt.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
            eprintln!(
                "\nstopping after the steps in flight (Ctrl-C again to quit at once; the steps in flight are then redone \
                 by `ksearch resume`)"
            );
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
    let recorded = match brain {
        BrainSpec::Replay { from, .. } => Some(crate::driver::recorded_evaluations(&RunStore::open(from)?)?),
        BrainSpec::Llm { .. } | BrainSpec::Agent | BrainSpec::Tuner => None,
    };
    let devices: Option<String> = match store.meta("devices")? {
        Some(v) => Some(serde_json::from_value(v).context("the run's recorded devices are unreadable")?),
        None => None,
    };
    let pool = crate::driver::stop_on_error(&store, device_pool(task, devices.as_deref(), quiet))?;
    let mut driver = Driver {
        store: &store,
        engine,
        brains,
        task,
        run_seed,
        eval_template: EvalOptions::new(run_seed),
        quiet,
        stop,
        recorded,
        pool,
        max_in_flight: 0,
    };
    let stopped = driver.run(&rt)?;
    let engine = &driver.engine;
    let max_in_flight = driver.max_in_flight;
    // The most requests ever served at once over the run's drives (runs can be resumed).
    let before: usize = store
        .meta("max_in_flight")?
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or(0);
    store.set_meta("max_in_flight", &json!(before.max(max_in_flight)))?;
    let dir = run_dir.display();
    Ok(match stopped {
        Stopped::AwaitingAgent { requests } => {
            let (id, role) = requests.first().cloned().unwrap_or_default();
            let mut json = json!({"run_dir": run_dir, "status": "awaiting_agent", "request_id": id, "role": role});
            let text = if requests.len() > 1 {
                // Several at once (a parallel run): every one is listed; the first keeps the
                // fields a one-at-a-time client reads.
                json["requests"] = requests
                    .iter()
                    .map(|(id, role)| json!({"id": id, "role": role}))
                    .collect();
                let list: Vec<String> = requests.iter().map(|(id, role)| format!("{id} ({role})")).collect();
                format!(
                    "waiting for the agent to answer {} requests: {}\n  read them: ksearch agent next {dir}\n  \
                     answer one: ksearch agent submit {dir} REQUEST_ID ANSWER_FILE",
                    requests.len(),
                    list.join(", ")
                )
            } else {
                format!(
                    "waiting for the agent to answer request {id} ({role})\n  read it:   ksearch agent next {dir}\n  \
                     answer it: ksearch agent submit {dir} {id} ANSWER_FILE"
                )
            };
            Outcome { json, text, exit: 0 }
        }
        Stopped::Interrupted => Outcome {
            json: json!({"run_dir": run_dir, "status": "interrupted"}),
            text: format!("stopped; continue with: ksearch resume {dir}"),
            exit: crate::EXIT_FAILED,
        },
        Stopped::LlmUnavailable { failures, error } => Outcome {
            json: json!({"run_dir": run_dir, "status": "llm_unavailable", "failures": failures, "error": error}),
            text: format!(
                "stopped: the LLM endpoint failed {failures} requests in a row, each after its retries; the last error:\n  \
                 {error}\nnothing is lost (the last request is kept unanswered); once the endpoint answers again, \
                 continue with: ksearch resume {dir}"
            ),
            exit: crate::EXIT_FAILED,
        },
        Stopped::Finished { best, reason } => {
            let best = best.and_then(|id| engine.candidate(id));
            let written = match best {
                Some(b) => Some(write_best(run_dir, b)?),
                None => None,
            };
            let speedup = best.and_then(|b| b.final_result.as_ref().and_then(|r| r.speedup).or(b.speedup()));
            let seed_speedup = engine.candidates().first().and_then(|c| c.speedup());
            let mut text = format!("finished: {reason}\n");
            match (best, speedup, &written) {
                (Some(b), Some(s), Some(path)) => {
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
            // The report is a convenience: a failure to write it is said, not fatal to the run.
            let report = ksearch_report::report_html(run_dir)
                .map_err(anyhow::Error::from)
                .and_then(|html| {
                    let path = run_dir.join("report.html");
                    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(path)
                });
            match &report {
                Ok(path) => text.push_str(&format!(
                    "report (charts, the tree, the best kernel against the seed): {}\n\
                     see the tree and every attempt in the terminal with: ksearch show {dir}",
                    path.display()
                )),
                Err(e) => text.push_str(&format!(
                    "the HTML report could not be written ({e:#}); try: ksearch report {dir}\n\
                     see the tree and every attempt with: ksearch show {dir}"
                )),
            }
            let report = report.ok();
            Outcome {
                json: json!({
                    "run_dir": run_dir, "status": "finished", "reason": reason,
                    "best_candidate": best.map(|b| b.id), "best_speedup": speedup,
                    "seed_speedup": seed_speedup, "best_files": written, "report": report, "rounds": engine.round(),
                    "max_in_flight": max_in_flight,
                }),
                text,
                exit: if best.is_some() { 0 } else { crate::EXIT_FAILED },
            }
        }
    })
}

/// The devices evaluations lease: `--devices` when given; otherwise every visible GPU for a
/// task whose kernels run on one, and one CPU slot for C tasks (timing two CPU kernels at once
/// would make both numbers noisy) or where no GPU is found.
pub(crate) fn device_pool(task: &Task, devices: Option<&str>, quiet: bool) -> anyhow::Result<DevicePool> {
    let chosen = match devices {
        Some(text) => {
            let spec: DeviceSpec = text.parse()?;
            ksearch_devices::select(&spec, ksearch_devices::discover_gpus)?
        }
        None if task.config.kernel.language == "c" => ksearch_devices::cpu_slots(1),
        None => match ksearch_devices::discover_gpus() {
            Ok(gpus) if !gpus.is_empty() => gpus,
            Ok(_) => ksearch_devices::cpu_slots(1),
            Err(e) => {
                if !quiet {
                    eprintln!("warning: {e}; evaluating one candidate at a time on the default device");
                }
                ksearch_devices::cpu_slots(1)
            }
        },
    };
    Ok(DevicePool::new(chosen)?)
}

pub(crate) fn load_events(store: &RunStore) -> anyhow::Result<Vec<Event>> {
    store
        .events()?
        .into_iter()
        .map(|row| {
            serde_json::from_value::<Event>(row.body).with_context(|| {
                format!(
                    "{}: event {} ({}) is unreadable",
                    store.path().display(),
                    row.seq,
                    row.kind
                )
            })
        })
        .collect()
}

fn write_best(run_dir: &Path, best: &ksearch_search::engine::Candidate) -> anyhow::Result<PathBuf> {
    let dir = run_dir.join("best");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for s in &best.sources {
        // Paths were checked when the candidate was evaluated (plain relative names).
        let path = dir.join(&s.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &s.content).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(dir.join(best.sources.first().map(|s| s.path.clone()).unwrap_or_default()))
}

/// `runs/TASK-YYYYMMDD-HHMMSS` in UTC.
fn default_run_dir(task: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    let stamp = i64::try_from(secs)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .unwrap_or_default();
    PathBuf::from("runs").join(format!("{task}-{}", stamp.format("%Y%m%d-%H%M%S")))
}
