//! `[[expertise]]` in task.toml: existing implementations of the same computation, handed to the
//! planner and coder as expertise to adapt (the user's own CUDA kernels, or the best kernel an
//! earlier ksearch run found for the matching CUDA task). The prompts show them beside the
//! translation layer for the task's target, at the `full` context level only.
//!
//! ```toml
//! [[expertise]]
//! file = "expertise/selective_scan_fwd.cu"     # in the task folder
//! description = "Mamba's chunked CUDA scan: state in registers, exp2, block scan of (a, b)"
//!
//! [[expertise]]
//! task = "mamba_scan"                             # a file of another built-in task
//! file = "seed.cu"
//! description = "the naive CUDA scan of the matching CUDA task"
//!
//! [[expertise]]
//! from_run = "../../runs/mamba_scan-20261201-101500"   # its best/ kernel
//! description = "the best kernel ksearch found for the CUDA task on the H200"
//! ```

use crate::error::{Problems, SpecError};
use crate::language::Language;
use crate::solution::{check_source_path, language_of, SourceFile};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One `[[expertise]]` entry of task.toml: exactly one of `file` and `from_run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpertiseConfig {
    /// A source file, relative to the task folder (or to the built-in task named by `task`).
    #[serde(default)]
    pub file: Option<String>,
    /// With `file`: the built-in task whose folder holds it, so tasks share a kernel (an MLX task
    /// citing its CUDA counterpart) without copying it.
    #[serde(default)]
    pub task: Option<String>,
    /// A ksearch run directory (relative to the task folder, or absolute); the files of its
    /// best kernel, which a finished run writes under `best/`, are the expertise.
    #[serde(default)]
    pub from_run: Option<String>,
    /// What it is and what is worth adapting from it, in a sentence or two (goes into prompts).
    pub description: String,
    /// The language it is written in; defaults to what the file extension implies (`.cu`).
    #[serde(default)]
    pub language: Option<Language>,
}

/// An `[[expertise]]` entry with its files read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expertise {
    /// The entry's `description`, trimmed (at most 400 characters).
    pub description: String,
    /// `cuda`, `triton`, ...: selects the translation layer from this language to the target.
    pub language: Language,
    /// Where it came from, for prompts and messages: the file, or `best kernel of run DIR`.
    pub origin: String,
    /// Its files, paths relative to the file's folder or to the run's `best/`.
    pub sources: Vec<SourceFile>,
}

/// The most characters one entry may bring into a prompt; a larger kernel should be trimmed to
/// the part worth adapting rather than silently cut.
pub const MAX_EXPERTISE_CHARS: usize = 60_000;
const MAX_DESCRIPTION: usize = 400;

/// Checks the entries' form (the files are read by [`load`]).
pub(crate) fn validate(list: &[ExpertiseConfig], p: &mut Problems) {
    for (i, e) in list.iter().enumerate() {
        let field = |f: &str| format!("expertise[{i}].{f}");
        match (&e.file, &e.from_run) {
            (Some(_), Some(_)) => p.push(format!("expertise[{i}]"), "give either `file` or `from_run`, not both"),
            (None, None) => p.push(
                format!("expertise[{i}]"),
                "needs `file` (a source in the task folder) or `from_run` (a ksearch run directory)",
            ),
            _ => {}
        }
        if let Some(file) = &e.file {
            if let Err(why) = check_source_path(file) {
                p.push(field("file"), format!("'{file}' {why}"));
            } else if e.language.is_none() && language_of(file).is_none() {
                p.push(
                    field("language"),
                    format!("is not set and '{file}' has no extension that names one (.c, .cu, .py)"),
                );
            }
        }
        if e.task.is_some() && e.file.is_none() {
            p.push(
                field("task"),
                "names the built-in task that holds `file`; give `file` too",
            );
        }
        if let Some(run) = &e.from_run {
            if run.trim().is_empty() {
                p.push(field("from_run"), "is empty");
            }
        }
        let n = e.description.trim().chars().count();
        if n == 0 {
            p.push(field("description"), "must say what the implementation is");
        } else if n > MAX_DESCRIPTION {
            p.push(
                field("description"),
                format!("{n} characters; at most {MAX_DESCRIPTION} (it goes into prompts)"),
            );
        }
    }
}

/// Reads every entry's files. `read` reads a file of the task (`None`: it does not exist);
/// `task_dir` is the folder relative `from_run` paths start from (the current directory for a
/// built-in task); `toml` names task.toml in messages.
pub(crate) fn load(
    list: &[ExpertiseConfig],
    read: &dyn Fn(&str) -> Result<Option<String>, SpecError>,
    task_dir: Option<&Path>,
    toml: &str,
) -> Result<Vec<Expertise>, SpecError> {
    let mut out = Vec::new();
    for (i, e) in list.iter().enumerate() {
        let (origin, sources, field) = match (&e.file, &e.from_run) {
            (Some(file), None) => {
                let content = match &e.task {
                    None => read(file)?,
                    Some(task) => crate::task::builtin_file(task, file),
                };
                let content = content.ok_or_else(|| {
                    let place = match &e.task {
                        None => "the task folder".to_string(),
                        Some(task) if crate::task::builtin_names().contains(task) => {
                            format!("the built-in task '{task}'")
                        }
                        Some(task) => format!(
                            "a built-in task: there is no built-in task '{task}' (known: {})",
                            crate::task::builtin_names().join(", ")
                        ),
                    };
                    SpecError::one(
                        toml,
                        format!("expertise[{i}].file"),
                        format!("'{file}' does not exist in {place}"),
                    )
                })?;
                let path = Path::new(file)
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| file.clone());
                let origin = match &e.task {
                    Some(task) => format!("tasks/{task}/{file}"),
                    None => file.clone(),
                };
                (origin, vec![SourceFile { path, content }], "file")
            }
            (None, Some(run)) => {
                let dir = match task_dir {
                    Some(base) if Path::new(run).is_relative() => base.join(run),
                    _ => PathBuf::from(run),
                };
                let sources = best_kernel(&dir).map_err(|why| {
                    SpecError::one(toml, format!("expertise[{i}].from_run"), format!("'{run}' {why}"))
                })?;
                (format!("best kernel of run {run}"), sources, "from_run")
            }
            // validate() has reported these already.
            _ => continue,
        };
        let language = match e.language {
            Some(l) => l,
            None => sources.iter().find_map(|s| language_of(&s.path)).ok_or_else(|| {
                SpecError::one(
                    toml,
                    format!("expertise[{i}].language"),
                    format!("is not set and no file of {origin} has an extension that names one (.c, .cu, .py)"),
                )
            })?,
        };
        let chars: usize = sources.iter().map(|s| s.content.chars().count()).sum();
        if chars > MAX_EXPERTISE_CHARS {
            return Err(SpecError::one(
                toml,
                format!("expertise[{i}].{field}"),
                format!(
                    "{origin} has {chars} characters; at most {MAX_EXPERTISE_CHARS} go into prompts: \
                     keep the kernels worth adapting and drop the rest"
                ),
            ));
        }
        out.push(Expertise {
            description: e.description.trim().to_string(),
            language,
            origin,
            sources,
        });
    }
    Ok(out)
}

/// The files of a finished run's best kernel (`<run>/best/`, sorted, sub-folders included).
fn best_kernel(run: &Path) -> Result<Vec<SourceFile>, String> {
    if !run.is_dir() {
        return Err("is not a directory (expected a ksearch run directory)".to_string());
    }
    let best = run.join("best");
    if !best.is_dir() {
        return Err("has no best/ folder: the run has not finished with a passing kernel".to_string());
    }
    let mut files = Vec::new();
    collect(&best, &best, 0, &mut files)?;
    if files.is_empty() {
        return Err("has an empty best/ folder".to_string());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<SourceFile>) -> Result<(), String> {
    // A candidate's sources are plain relative paths, a few levels deep at most.
    const MAX_DEPTH: usize = 4;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?.path();
        if path.is_dir() {
            if depth < MAX_DEPTH {
                collect(root, &path, depth + 1, out)?;
            }
        } else if path.is_file() {
            let content = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push(SourceFile {
                path: rel.to_string_lossy().replace('\\', "/"),
                content,
            });
        }
    }
    Ok(())
}
