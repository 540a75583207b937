//! Driving a run: replays its event log into the engine, builds its brains and its executor,
//! and serves the engine's requests until the run finishes, waits for an agent or for
//! evaluations, or is stopped; then records what the drive did and writes the best kernel and
//! the report of a finished run.

use crate::brains::BrainSpec;
use crate::driver::{Driver, Stopped};
use crate::error::RunError;
use crate::executor::{Deferred, Executor, ExecutorKind, Local};
use crate::open::OpenRun;
use anyhow::Context;
use ksearch_devices::{DevicePool, DeviceSpec};
use ksearch_eval::EvalOptions;
use ksearch_llm::LlmConfig;
use ksearch_search::engine::{Candidate, Engine, Event};
use ksearch_spec::Task;
use ksearch_store::{MetaKey, RunStore, StopReason};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How to drive.
#[derive(Debug, Clone, Default)]
pub struct DriveOptions {
    /// No progress on stderr.
    pub quiet: bool,
    /// Evaluate with this executor instead of the run's (`ksearch evaluate`: local).
    pub executor: Option<ExecutorKind>,
    /// The most evaluations this drive runs (`ksearch evaluate --max`).
    pub max_evaluations: Option<usize>,
    /// Refuse, before anything runs, when this machine lacks the task's device (`evaluate`:
    /// a candidate is never recorded as failed for want of a GPU).
    pub require_device: bool,
}

/// What a drive did and how it ended.
#[derive(Debug)]
pub struct Drove {
    /// Why the drive returned: the run finished, waits for an agent or for evaluations, or was
    /// stopped.
    pub stopped: Stopped,
    /// The engine as the drive left it.
    pub engine: Engine,
    /// The most requests served at once in this drive.
    pub max_in_flight: usize,
    /// Candidates evaluated by this drive, in the order their results were recorded.
    pub evaluated: Vec<i64>,
    /// A finished run's best kernel, written to `RUN_DIR/best/`.
    pub best_file: Option<PathBuf>,
    /// A finished run's report (`RUN_DIR/report.html`), or why it could not be written.
    pub report: Option<Result<PathBuf, String>>,
}

impl Drove {
    /// A finished run's best candidate, with the speedup it was re-measured at.
    pub fn best(&self) -> Option<(&Candidate, Option<f64>)> {
        let Stopped::Finished { best, .. } = &self.stopped else {
            return None;
        };
        let b = best.and_then(|id| self.engine.candidate(id))?;
        Some((b, b.final_result.as_ref().and_then(|r| r.speedup).or(b.speedup())))
    }
}

/// Drives the run until it finishes, waits for an agent or evaluations, or is interrupted;
/// prints nothing on stdout (progress goes to stderr unless `quiet`). The caller holds the
/// run's lock.
pub fn drive(run: &OpenRun, llm_config: &LlmConfig, opts: &DriveOptions) -> anyhow::Result<Drove> {
    if run.lock.is_none() {
        anyhow::bail!("internal: {} is driven without its lock", run.dir.display());
    }
    let store = &run.store;
    let task = &run.task;
    let events = load_events(store)?;
    let engine = Engine::replay(&events).context("the run's event log does not replay")?;
    // Failures before the loop runs are recorded as the run's stop too (the loop records its own).
    let brains = crate::driver::stop_on_error(store, run.brain.build(llm_config, store, task))?;
    let run_seed: u64 = serde_json::from_value(store.meta(MetaKey::RunSeed)?.unwrap_or(json!(0)))?;
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
    let recorded = match &run.brain {
        BrainSpec::Replay { from, .. } => Some(crate::driver::recorded_evaluations(&RunStore::open(from)?)?),
        BrainSpec::Llm { .. } | BrainSpec::Agent | BrainSpec::Tuner => None,
    };
    let devices: Option<String> = match store.meta(MetaKey::Devices)? {
        Some(v) => Some(serde_json::from_value(v).context("the run's recorded devices are unreadable")?),
        None => None,
    };
    let kind = opts.executor.unwrap_or(run.executor);
    let local;
    let ray;
    let deferred = Deferred;
    let executor: &dyn Executor = match kind {
        ExecutorKind::Deferred => &deferred,
        ExecutorKind::Ray => {
            let settings: crate::executor::ray::RaySettings = serde_json::from_value(
                store
                    .meta(MetaKey::Ray)?
                    .context("a Ray run has no recorded cluster (`ray` in its metadata)")?,
            )
            .context("the run's recorded Ray cluster is unreadable")?;
            let gpu = crate::executor::ray::wants_gpu(task);
            ray = match crate::executor::ray::Ray::connect(&settings, task, gpu) {
                Ok(cluster) => cluster,
                // A cluster that cannot be reached (still down after it went away, say) keeps the
                // run's stop as executor_unavailable, with its hint, rather than a generic error.
                Err(e @ crate::executor::ray::RayError::Connect { .. }) => {
                    crate::driver::record_stop(
                        store,
                        StopReason::ExecutorUnavailable,
                        &format!("{e}; `ksearch resume` continues once it is back (or at another address, with `--ray-address ADDR`; or here, with `--executor local`)"),
                    );
                    return Err(e.into());
                }
                Err(e) => return crate::driver::stop_on_error(store, Err(e.into())),
            };
            if !opts.quiet {
                eprintln!(
                    "ksearch: Ray cluster at {}: {} node(s), {} {} slot(s)",
                    settings.address,
                    ray.nodes().len(),
                    ray.slots(),
                    if gpu { "GPU" } else { "CPU" }
                );
            }
            &ray
        }
        ExecutorKind::Local => {
            if opts.require_device {
                crate::driver::stop_on_error(store, require_device(&run.dir, task, devices.as_deref()))?;
            }
            let pool = crate::driver::stop_on_error(store, device_pool(task, devices.as_deref(), opts.quiet))?;
            local = Local { pool };
            &local
        }
    };
    let profile = store.meta(MetaKey::Profile)?.and_then(|v| v.as_bool()).unwrap_or(false);
    if profile && kind == ExecutorKind::Local && ksearch_eval::profile::find_ncu().is_none() && !opts.quiet {
        eprintln!(
            "ksearch: --profile: Nsight Compute (ncu) was not found here (KSEARCH_NCU, CUDA_HOME, PATH); candidates \
             are evaluated without profiles"
        );
    }
    let mut driver = Driver {
        store,
        engine,
        brains,
        task,
        run_seed,
        eval_template: EvalOptions::new(run_seed),
        quiet: opts.quiet,
        stop,
        recorded,
        executor,
        max_evaluations: opts.max_evaluations,
        max_in_flight: 0,
        evaluated: Vec::new(),
        profile,
    };
    let stopped = driver.run(&rt)?;
    let Driver {
        engine,
        max_in_flight,
        evaluated,
        ..
    } = driver;
    // The most requests ever served at once over the run's drives (runs can be resumed).
    let before: usize = store
        .meta(MetaKey::MaxInFlight)?
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or(0);
    store.set_meta(MetaKey::MaxInFlight, &json!(before.max(max_in_flight)))?;
    let mut drove = Drove {
        stopped,
        engine,
        max_in_flight,
        evaluated,
        best_file: None,
        report: None,
    };
    if let Stopped::Finished { .. } = &drove.stopped {
        if let Some((best, _)) = drove.best() {
            drove.best_file = Some(write_best(&run.dir, best)?);
        }
        // The report is a convenience: a failure to write it is said, not fatal to the run.
        drove.report = Some(
            ksearch_report::report_html(&run.dir)
                .map_err(anyhow::Error::from)
                .and_then(|html| {
                    let path = run.dir.join("report.html");
                    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
                    Ok(path)
                })
                .map_err(|e| format!("{e:#}")),
        );
    }
    Ok(drove)
}

/// `ksearch resume --ray-address`: points the run at a cluster at another address (the old one
/// gone for good, or moved), keeping the recorded ksearch path on the nodes unless `ksearch`
/// names another. Checked before anything is recorded: the drive must evaluate on Ray (`kind`,
/// this drive's executor), and nothing may refuse connections at the address.
pub fn set_ray_cluster(
    run: &OpenRun,
    kind: ExecutorKind,
    address: &str,
    ksearch: Option<&str>,
) -> anyhow::Result<crate::executor::ray::RaySettings> {
    if kind != ExecutorKind::Ray {
        anyhow::bail!("--ray-address goes with --executor ray (this drive evaluates with `{kind}`)");
    }
    crate::executor::ray::check_address(address)?;
    let recorded: Option<crate::executor::ray::RaySettings> = match run.store.meta(MetaKey::Ray)? {
        Some(v) => Some(serde_json::from_value(v).context("the run's recorded Ray cluster is unreadable")?),
        None => None,
    };
    let settings = crate::executor::ray::RaySettings {
        address: address.to_string(),
        ksearch: match (ksearch, recorded) {
            (Some(k), _) => k.to_string(),
            (None, Some(r)) => r.ksearch,
            (None, None) => "ksearch".to_string(),
        },
    };
    run.store.set_meta(MetaKey::Ray, &serde_json::to_value(&settings)?)?;
    Ok(settings)
}

/// `--parallel auto`: as many requests at once as the executor runs evaluations at once: the
/// Ray cluster's GPUs (GPU tasks) or CPUs (C tasks), found by connecting to it (which also
/// checks the address and the nodes before the run is created); the local device pool's size.
/// Capped at 256, the most a run serves at once.
pub fn auto_parallel(
    task: &Task,
    kind: ExecutorKind,
    ray: Option<&crate::executor::ray::RaySettings>,
    devices: Option<&str>,
) -> anyhow::Result<u32> {
    let n = match (kind, ray) {
        (ExecutorKind::Ray, Some(settings)) => {
            let gpu = crate::executor::ray::wants_gpu(task);
            let cluster = crate::executor::ray::Ray::connect(settings, task, gpu)?;
            if cluster.slots() == 0 {
                anyhow::bail!(
                    "--parallel auto: the Ray cluster at {} has no {} to run evaluations on",
                    settings.address,
                    if gpu { "GPU" } else { "CPU" }
                );
            }
            cluster.slots()
        }
        (ExecutorKind::Ray, None) => return Err(crate::executor::ray::RayError::NoAddress.into()),
        (ExecutorKind::Local | ExecutorKind::Deferred, _) => device_pool(task, devices, true)?.size(),
    };
    Ok(n.clamp(1, 256) as u32)
}

/// Refuses when this machine cannot run the task's kernels where they must run: a task whose
/// language needs a GPU (CUDA, Triton: [`ksearch_spec::Language::needs_gpu`]) with no GPU in sight (nvidia-smi lists none, or `--devices` names only CPU
/// slots).
fn require_device(dir: &Path, task: &Task, devices: Option<&str>) -> anyhow::Result<()> {
    let language = task.config.kernel.language;
    if !language.needs_gpu() {
        return Ok(());
    }
    let gpus = match devices {
        Some(text) => {
            let spec: DeviceSpec = text.parse()?;
            ksearch_devices::select(&spec, ksearch_devices::discover_gpus)
                .map(|d| d.iter().filter(|d| d.cuda_device().is_some()).count())
                .unwrap_or(0)
        }
        None => ksearch_devices::discover_gpus().map(|g| g.len()).unwrap_or(0),
    };
    if gpus == 0 {
        return Err(RunError::DeviceAbsent {
            dir: dir.to_path_buf(),
            what: format!("the task's {language} kernels run on an NVIDIA GPU, and this machine shows none"),
            need: "an NVIDIA GPU (nvidia-smi lists it)".into(),
        }
        .into());
    }
    Ok(())
}

/// The devices evaluations lease: `--devices` when given; otherwise every visible GPU for a
/// task whose kernels run on one, and one CPU slot for C tasks (timing two CPU kernels at once
/// would make both numbers noisy) or where no GPU is found.
pub fn device_pool(task: &Task, devices: Option<&str>, quiet: bool) -> anyhow::Result<DevicePool> {
    let chosen = match devices {
        Some(text) => {
            let spec: DeviceSpec = text.parse()?;
            ksearch_devices::select(&spec, ksearch_devices::discover_gpus)?
        }
        None if !task.config.kernel.language.gpu_by_default() => ksearch_devices::cpu_slots(1),
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

/// The run's event log, decoded.
pub fn load_events(store: &RunStore) -> anyhow::Result<Vec<Event>> {
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

fn write_best(run_dir: &Path, best: &Candidate) -> anyhow::Result<PathBuf> {
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
