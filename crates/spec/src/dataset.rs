//! FlashInfer-Bench datasets as they are: a definition file taken from a dataset's layout
//!
//! ```text
//! DATASET/definitions/<op_type>/<name>.json
//! DATASET/workloads/<op_type>/<name>.jsonl     (one workload trace a line)
//! DATASET/blob/workloads/<op_type>/<name>/...  (safetensors, paths relative to DATASET)
//! ```
//!
//! is a task without a task folder: its workloads are found in the dataset beside the
//! definition, safetensors paths resolve against the dataset's root (as FlashInfer-Bench's
//! TraceSet resolves them), and its settings are task.toml's defaults.

use crate::definition::Definition;
use crate::error::SpecError;
use crate::task::{Task, TaskOrigin};
use crate::workload::InputSpec;
use std::path::{Path, PathBuf};

/// Where a dataset task's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetFiles {
    /// The dataset's root (the folder holding `definitions/`), which safetensors paths are
    /// relative to.
    pub root: PathBuf,
    /// The definition file, as it was named.
    pub definition: PathBuf,
    /// The workloads file found for it.
    pub workloads: PathBuf,
}

/// The root of the FlashInfer-Bench dataset holding `definition`: the parent of the nearest
/// `definitions` folder above it.
pub fn dataset_root(definition: &Path) -> Option<PathBuf> {
    definition.ancestors().skip(1).find_map(|dir| {
        if dir.file_name().is_some_and(|n| n == "definitions") {
            Some(match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            })
        } else {
            None
        }
    })
}

/// The places a definition's workloads may be, in the order they are tried: FlashInfer-Bench's
/// `workloads/<op_type>/<name>.jsonl`, then the definition's own path under `definitions/`
/// with `workloads/` and `.jsonl` instead (the same unless the file is named otherwise).
pub fn workload_candidates(root: &Path, definition: &Path, def: &Definition) -> Vec<PathBuf> {
    let mut out = vec![root
        .join("workloads")
        .join(&def.op_type)
        .join(format!("{}.jsonl", def.name))];
    if let Ok(rel) = definition.strip_prefix(root.join("definitions")) {
        let mirrored = root.join("workloads").join(rel).with_extension("jsonl");
        if !out.contains(&mirrored) {
            out.push(mirrored);
        }
    }
    out
}

/// Loads the definition file `path` of a FlashInfer-Bench dataset as a task.
pub(crate) fn load(path: &Path) -> Result<Task, SpecError> {
    let shown = path.display().to_string();
    let Some(root) = dataset_root(path) else {
        return Err(SpecError::one(
            &shown,
            "",
            "is neither a task folder's definition.json nor inside a FlashInfer-Bench dataset \
             (no `definitions` folder above it, so its workloads cannot be found); give a task \
             folder or DATASET/definitions/<op_type>/<name>.json",
        ));
    };
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Io {
        path: shown.clone(),
        source,
    })?;
    let def = Definition::parse(&shown, &text)?;
    let candidates = workload_candidates(&root, path, &def);
    let Some(workloads) = candidates.iter().find(|p| p.is_file()).cloned() else {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        return Err(SpecError::one(
            &shown,
            "",
            format!(
                "no workloads file found at {} (a FlashInfer-Bench dataset keeps a definition's \
                 workloads at workloads/<op_type>/<name>.jsonl)",
                tried.join(" or ")
            ),
        ));
    };
    let files = DatasetFiles {
        root: root.clone(),
        definition: path.to_path_buf(),
        workloads: workloads.clone(),
    };
    let read_path = |p: &Path| -> Result<Option<String>, SpecError> {
        match std::fs::read_to_string(p) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SpecError::Io {
                path: p.display().to_string(),
                source,
            }),
        }
    };
    let read = |name: &str| -> Result<Option<String>, SpecError> {
        match name {
            "definition.json" => Ok(Some(text.clone())),
            "workloads.jsonl" => read_path(&workloads),
            // A dataset has no task.toml: its settings are the defaults.
            "task.toml" => Ok(None),
            other => read_path(&root.join(other)),
        }
    };
    let exists = |rel: &str| root.join(rel).is_file();
    Task::assemble(TaskOrigin::Dataset(files), &read, &exists)
}

/// How a file of a dataset task is named in messages.
pub(crate) fn display(files: &DatasetFiles, name: &str) -> String {
    match name {
        "definition.json" => files.definition.display().to_string(),
        "workloads.jsonl" => files.workloads.display().to_string(),
        "task.toml" => format!(
            "{} (no task.toml: a dataset definition takes task.toml's defaults)",
            files.definition.display()
        ),
        other => files.root.join(other).display().to_string(),
    }
}

/// The dataset task as the files of a task folder: definition.json, workloads.jsonl and every
/// safetensors file its workloads read (at the same relative paths, so they resolve the same
/// way), for a run's snapshot and for a job sent to another machine.
pub fn folder_files(files: &DatasetFiles, task: &Task) -> Result<Vec<(String, Vec<u8>)>, SpecError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|source| SpecError::Io {
            path: p.display().to_string(),
            source,
        })
    };
    let mut out = vec![
        ("definition.json".to_string(), read(&files.definition)?),
        ("workloads.jsonl".to_string(), read(&files.workloads)?),
    ];
    for w in &task.workloads {
        for spec in w.inputs.values() {
            let InputSpec::Safetensors { path, .. } = spec else {
                continue;
            };
            let rel: Vec<&str> = path.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
            let rel = rel.join("/");
            if rel.is_empty() || out.iter().any(|(p, _)| *p == rel) {
                continue;
            }
            out.push((rel.clone(), read(&files.root.join(&rel))?));
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_above_the_nearest_definitions_folder() {
        assert_eq!(
            dataset_root(Path::new("data/definitions/rmsnorm/r.json")),
            Some(PathBuf::from("data"))
        );
        assert_eq!(
            dataset_root(Path::new("definitions/rmsnorm/r.json")),
            Some(PathBuf::from("."))
        );
        assert_eq!(dataset_root(Path::new("tasks/softmax/def.json")), None);
    }

    #[test]
    fn a_dataset_definition_becomes_a_task_folder_with_its_blobs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/fib_dataset");
        let def = root.join("definitions/softmax/tiny_fib_softmax.json");
        let task = Task::load(&def.display().to_string()).unwrap();
        let TaskOrigin::Dataset(files) = &task.origin else {
            panic!("not a dataset task: {:?}", task.origin);
        };
        assert_eq!(task.dir(), Some(root.as_path()));
        assert!(task.workloads.iter().all(|w| w.synthesized.is_empty()));
        let listed = folder_files(files, &task).unwrap();
        let names: Vec<&str> = listed.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "blob/workloads/softmax/tiny_fib_softmax/tiny_fib_softmax_blob-2x8.safetensors",
                "definition.json",
                "workloads.jsonl"
            ]
        );
        // Written out, they load as a task folder, the blob found at the same relative path.
        let dir = tempfile::tempdir().unwrap();
        for (rel, bytes) in &listed {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        let again = Task::load_folder(dir.path()).unwrap();
        assert_eq!(again.definition.name, "tiny_fib_softmax");
        assert!(again.workloads.iter().all(|w| w.synthesized.is_empty()));
        assert!(task.file("task.toml").contains("task.toml's defaults"));
    }
}
