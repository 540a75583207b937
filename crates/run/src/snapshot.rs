//! The task as it was when the run started, inside the run directory (`RUN_DIR/task/`), with its
//! SHA-256 recorded in the run's metadata (`task_snapshot`). A run is always evaluated with this
//! copy, on whichever machine it is evaluated, so a run directory travels whole and a task edited
//! since the start cannot change what later candidates are measured against: a snapshot that no
//! longer matches its hash is refused.

use anyhow::Context;
use ksearch_spec::{Task, TaskOrigin};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The folder of the snapshot inside a run directory.
pub const TASK_DIR: &str = "task";

/// What the run's metadata records of its snapshot (`task_snapshot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    /// The folder, relative to the run directory.
    pub dir: String,
    /// SHA-256 over every file's relative path and contents, in path order.
    pub sha256: String,
    /// How many files the snapshot holds.
    pub files: usize,
}

/// Copies `task`'s files into `run_dir/task/` and returns what to record.
pub fn write(task: &Task, run_dir: &Path) -> anyhow::Result<SnapshotMeta> {
    let files = match &task.origin {
        TaskOrigin::Builtin(name) => ksearch_spec::builtin_task_files(name)
            .with_context(|| format!("the built-in task '{name}' has no files"))?,
        TaskOrigin::Folder(dir) => read_tree(dir)?,
        // A FlashInfer-Bench dataset's definition: its files become a task folder.
        TaskOrigin::Dataset(files) => ksearch_spec::dataset_folder_files(files, task)?,
    };
    let dest = run_dir.join(TASK_DIR);
    for (rel, bytes) in &files {
        let path = dest.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(SnapshotMeta {
        dir: TASK_DIR.to_string(),
        sha256: hash(&files),
        files: files.len(),
    })
}

/// The snapshot's task, after checking it against its recorded hash.
pub fn load(run_dir: &Path, meta: &SnapshotMeta) -> anyhow::Result<Task> {
    let dir = run_dir.join(&meta.dir);
    let files = read_tree(&dir).with_context(|| format!("the run's task snapshot {}", dir.display()))?;
    let now = hash(&files);
    if now != meta.sha256 {
        return Err(crate::RunError::TaskChanged {
            dir: run_dir.to_path_buf(),
            recorded: short(&meta.sha256),
            now: short(&now),
        }
        .into());
    }
    Task::load_folder(&dir).with_context(|| format!("the run's task snapshot {}", dir.display()))
}

fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

/// Every regular file under `dir` (links followed), as (relative path, contents), sorted.
fn read_tree(dir: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).with_context(|| format!("cannot read {}", d.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", d.display()))?;
            let path = entry.path();
            let name = entry.file_name();
            // Caches a tool may leave in a task folder are not part of the task.
            if name == "__pycache__" || name == ".git" {
                continue;
            }
            let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
                out.push((rel, bytes));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn hash(files: &[(String, Vec<u8>)]) -> String {
    let mut h = Sha256::new();
    for (rel, bytes) in files {
        h.update(rel.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builtin_task_snapshot_loads_and_an_edit_is_refused() {
        let run = tempfile::tempdir().unwrap();
        let task = Task::load("softmax").unwrap();
        let meta = write(&task, run.path()).unwrap();
        assert!(meta.files >= 3);
        let again = load(run.path(), &meta).unwrap();
        assert_eq!(again.definition.name, task.definition.name);
        assert_eq!(again.workloads.len(), task.workloads.len());
        let wl = run.path().join("task/workloads.jsonl");
        let text = std::fs::read_to_string(&wl).unwrap();
        std::fs::write(&wl, text.replace("\n", "\n\n")).unwrap();
        let err = load(run.path(), &meta).unwrap_err();
        assert!(
            matches!(
                err.downcast_ref::<crate::RunError>(),
                Some(crate::RunError::TaskChanged { .. })
            ),
            "{err:#}"
        );
    }
}
