//! Opening a run directory again: its store, its task (the snapshot, checked against its
//! hash; runs made before snapshots load the task they name), its brain and settings, and for
//! a writer the run's lock.

use crate::brains::BrainSpec;
use crate::executor::ExecutorKind;
use crate::lock::RunLock;
use crate::snapshot::SnapshotMeta;
use anyhow::Context;
use ksearch_spec::Task;
use ksearch_store::{MetaKey, RunStore};
use std::path::{Path, PathBuf};

/// A run directory opened to be driven (or read).
pub struct OpenRun {
    /// The run directory.
    pub dir: PathBuf,
    /// The run's store (`run.sqlite`).
    pub store: RunStore,
    /// The task the run evaluates against: its snapshot (checked against its hash), or for runs
    /// made before snapshots the task their metadata names.
    pub task: Task,
    /// The brains recorded when the run was made (`brain` in its metadata).
    pub brain: BrainSpec,
    /// The executor recorded when the run was made; [`ExecutorKind::Local`] for runs made before
    /// executors were recorded.
    pub executor: ExecutorKind,
    /// Held while this process changes the run; `None` for a reader.
    pub lock: Option<RunLock>,
}

/// Opens the run in `dir` for writing: takes its lock first (refused if another process holds
/// it), saying `what` this process does.
pub fn open_for(dir: &Path, what: &str) -> anyhow::Result<OpenRun> {
    if !dir.join(ksearch_store::DB_FILE).is_file() {
        // The store's own error names what is missing; no lock file is left in a stranger's folder.
        RunStore::open(dir)?;
    }
    let lock = RunLock::acquire(dir, what)?;
    let mut run = open_read(dir)?;
    run.lock = Some(lock);
    Ok(run)
}

/// Opens the run in `dir` to read it (no lock).
pub fn open_read(dir: &Path) -> anyhow::Result<OpenRun> {
    let store = RunStore::open(dir)?;
    let task = run_task(dir, &store)?;
    let brain: BrainSpec =
        serde_json::from_value(store.meta(MetaKey::Brain)?.context("the run has no recorded brain")?)
            .context("the run's recorded brain is unreadable")?;
    let executor = match store.meta(MetaKey::Executor)? {
        Some(v) => serde_json::from_value(v).context("the run's recorded executor is unreadable")?,
        None => ExecutorKind::Local,
    };
    Ok(OpenRun {
        dir: dir.to_path_buf(),
        store,
        task,
        brain,
        executor,
        lock: None,
    })
}

/// The run's task: its snapshot where it has one, else the task its metadata names.
pub fn run_task(dir: &Path, store: &RunStore) -> anyhow::Result<Task> {
    if let Some(meta) = store.meta(MetaKey::TaskSnapshot)? {
        let meta: SnapshotMeta = serde_json::from_value(meta).context("the run's task_snapshot is unreadable")?;
        return crate::snapshot::load(dir, &meta);
    }
    let task_arg: String = serde_json::from_value(store.meta(MetaKey::Task)?.context("the run has no recorded task")?)?;
    Task::load(&task_arg).with_context(|| format!("the run's task '{task_arg}'"))
}
