//! Making a run directory: the task's snapshot, the store with what the run needs to be
//! resumed anywhere (task, brain, seed, settings), and the `started` event.

use crate::brains::BrainSpec;
use crate::error::RunError;
use crate::executor::ExecutorKind;
use crate::lock::RunLock;
use crate::open::OpenRun;
use anyhow::Context;
use ksearch_search::engine::{EngineConfig, Event, Strategy};
use ksearch_spec::Task;
use ksearch_store::{MetaKey, RunStore};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The engine settings a run is created with.
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// Coder rounds before the run stops (`EngineConfig::rounds`, `--rounds`).
    pub rounds: u32,
    /// How candidates are generated (`--strategy`).
    pub strategy: Strategy,
    /// Share of `rounds` that knob sweeps of written kernels may use (`EngineConfig::knob_share`);
    /// ignored, and recorded as 0, when the tuner is the brain.
    pub knob_share: f64,
    /// How often the best may be measured again (`EngineConfig::remeasure`, `--remeasure`).
    pub remeasure: u32,
    /// What the prompts cite from the knowledge base (`--context`).
    pub context: ksearch_kb::ContextLevel,
    /// Requests served at once (`EngineConfig::parallel`).
    pub parallel: u32,
    /// `--devices` as given (checked), recorded so `resume` uses the same devices.
    pub devices: Option<String>,
    /// Where evaluations run (`--executor`).
    pub executor: ExecutorKind,
    /// The cluster of `--executor ray`.
    pub ray: Option<crate::executor::ray::RaySettings>,
    /// Who answers an agent-mode run (model, and how), recorded for `ksearch show`.
    pub brain_note: Option<String>,
    /// Profile every passing candidate with Nsight Compute, for the planner (`--profile`).
    pub profile: bool,
}

/// A run directory just created (open and locked by this process, its task read back from its
/// snapshot), and the seed of its evaluations.
pub struct NewRun {
    /// The run, open and locked, ready for [`crate::drive`].
    pub run: OpenRun,
    /// The run's seed (the given one or a fresh one): recorded in the store's metadata, used as
    /// the engine's `rng_seed`, and the root of every evaluation's input seed.
    pub run_seed: u64,
}

/// Creates the run directory (`out`, or `runs/TASK-DATE-TIME`) and its store, records what the
/// run needs to be resumed (task snapshot, brain, seed, version, settings) and appends the
/// `started` event. Prints nothing. `task_arg` is the task as the user gave it (a built-in name
/// or a folder). Either the whole run is made, or the directory is left as it was: a second
/// `run` into the same directory at once is refused ([`RunError::Locked`] or
/// [`RunError::Exists`]).
pub fn create_run(
    task_arg: &str,
    task: &Task,
    brain: &BrainSpec,
    settings: SearchSettings,
    out: Option<PathBuf>,
    seed: Option<u64>,
) -> anyhow::Result<NewRun> {
    let run_dir = out.unwrap_or_else(|| default_run_dir(&task.definition.name));
    std::fs::create_dir_all(&run_dir).with_context(|| format!("cannot create {}", run_dir.display()))?;
    let lock = RunLock::acquire(&run_dir, "run")?;
    if run_dir.join(ksearch_store::DB_FILE).exists() {
        return Err(RunError::Exists {
            dir: run_dir,
            why: "already holds a run; continue it with `ksearch resume`, or choose another --out".into(),
        }
        .into());
    }
    // Written under a temporary name until the `started` event is in: a kill before that leaves
    // no half-made run for `resume` to trip on.
    let store = RunStore::create_staged(&run_dir)?;
    let run_seed = seed.unwrap_or_else(crate::fresh_seed);
    // The task argument is kept as given for built-ins, absolute for folders (for messages: the
    // run itself uses its snapshot).
    let recorded_task = match Path::new(task_arg).canonicalize() {
        Ok(p) if Path::new(task_arg).exists() => p.display().to_string(),
        _ => task_arg.to_string(),
    };
    // A leftover snapshot of a run killed before its store was published is replaced.
    let snapshot_dir = run_dir.join(crate::snapshot::TASK_DIR);
    if snapshot_dir.exists() {
        std::fs::remove_dir_all(&snapshot_dir).with_context(|| format!("cannot replace {}", snapshot_dir.display()))?;
    }
    let snapshot = crate::snapshot::write(task, &run_dir)?;
    store.set_meta(MetaKey::Task, &json!(recorded_task))?;
    store.set_meta(MetaKey::TaskSnapshot, &serde_json::to_value(&snapshot)?)?;
    store.set_meta(MetaKey::Brain, &serde_json::to_value(brain)?)?;
    if let Some(note) = &settings.brain_note {
        store.set_meta(MetaKey::BrainNote, &json!(note))?;
    }
    store.set_meta(MetaKey::RunSeed, &json!(run_seed))?;
    store.set_meta(MetaKey::KsearchVersion, &json!(env!("CARGO_PKG_VERSION")))?;
    store.set_meta(MetaKey::Executor, &json!(settings.executor))?;
    if let Some(ray) = &settings.ray {
        store.set_meta(MetaKey::Ray, &serde_json::to_value(ray)?)?;
    }
    if settings.profile {
        store.set_meta(MetaKey::Profile, &json!(true))?;
    }
    if let Some(devices) = &settings.devices {
        store.set_meta(MetaKey::Devices, &json!(devices))?;
    }
    let config = EngineConfig {
        rounds: settings.rounds,
        strategy: settings.strategy,
        parallel: settings.parallel.max(1),
        // world-model: --parallel N asks for N coder answers at each step of a cycle.
        samples: if settings.strategy == Strategy::WorldModel {
            settings.parallel.max(1)
        } else {
            1
        },
        rng_seed: run_seed,
        // The tuner's kernels come from its template; sweeps are for written kernels.
        knob_share: if *brain == BrainSpec::Tuner {
            0.0
        } else {
            settings.knob_share
        },
        remeasure: settings.remeasure,
        ..EngineConfig::default()
    };
    let kb = crate::knowledge::kb()?;
    store.set_meta(MetaKey::Context, &json!(settings.context.to_string()))?;
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
    let task = crate::snapshot::load(&run_dir, &snapshot)?;
    Ok(NewRun {
        run: OpenRun {
            dir: run_dir,
            store,
            task,
            brain: brain.clone(),
            executor: settings.executor,
            lock: Some(lock),
        },
        run_seed,
    })
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
