//! A task: definition + workloads + task.toml, from a folder or built into the binary.

use crate::definition::Definition;
use crate::error::SpecError;
use crate::knobs::{KernelTemplate, KnobSpace};
use crate::language::Language;
use crate::solution::{BuildSpec, Solution, SourceFile};
use crate::task_config::TaskConfig;
use crate::workload::{parse_workloads, Workload};
use include_dir::{include_dir, Dir};
use std::path::{Path, PathBuf};

static BUILTIN_TASKS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../tasks");

/// Where a task was loaded from; it decides how its files are named in messages and whether
/// it has a folder on disk ([`Task::dir`]).
#[derive(Debug, Clone)]
pub enum TaskOrigin {
    /// A folder on disk.
    Folder(PathBuf),
    /// Compiled into the binary; the name of its folder under `tasks/`.
    Builtin(String),
    /// A definition file of a FlashInfer-Bench dataset, taken as it is (docs/task-format.md,
    /// "FlashInfer-Bench datasets"): its workloads from the dataset, task.toml's defaults.
    Dataset(crate::dataset::DatasetFiles),
}

/// A loaded, fully validated task: everything the search, the evaluator and the prompts need to
/// know about the computation, with the files task.toml names already read.
#[derive(Debug, Clone)]
pub struct Task {
    /// Where it came from.
    pub origin: TaskOrigin,
    /// definition.json.
    pub definition: Definition,
    /// workloads.jsonl, in file order; at least one.
    pub workloads: Vec<Workload>,
    /// task.toml, or its defaults when the folder has none.
    pub config: TaskConfig,
    /// The seed kernel named by `[kernel].seed`, if any.
    pub seed: Option<SourceFile>,
    /// The kernel template and its knobs (`[kernel].template` and `.knobs`), for the tuner.
    pub template: Option<KernelTemplate>,
    /// The `[[baselines]]` as solutions, in task.toml order.
    pub baselines: Vec<Solution>,
    /// The `[[expertise]]` entries with their files read, in task.toml order.
    pub expertise: Vec<crate::expertise::Expertise>,
}

impl Task {
    /// `arg` is a path (a task folder, its definition.json, or a definition file of a
    /// FlashInfer-Bench dataset, `DATASET/definitions/<op_type>/<name>.json`) or a built-in
    /// task's name.
    pub fn load(arg: &str) -> Result<Task, SpecError> {
        let path = Path::new(arg);
        if path.is_dir() {
            return Task::load_folder(path);
        }
        if path.is_file() {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            // A file of a task folder (its definition.json, or any file beside one) names the
            // folder; any other definition file is read from its dataset.
            if path.file_name().is_some_and(|n| n == "definition.json") || dir.join("definition.json").is_file() {
                return Task::load_folder(dir);
            }
            return crate::dataset::load(path);
        }
        if BUILTIN_TASKS.get_dir(arg).is_some() && !arg.contains('/') {
            return Task::load_builtin(arg);
        }
        Err(SpecError::UnknownTask {
            name: arg.to_string(),
            available: builtin_names().join(", "),
        })
    }

    /// Loads the task in folder `dir`: definition.json and workloads.jsonl must be there,
    /// task.toml may be. Problems independent of each other are reported together.
    pub fn load_folder(dir: &Path) -> Result<Task, SpecError> {
        let dir = dir.to_path_buf();
        let read = |name: &str| -> Result<Option<String>, SpecError> {
            let p = dir.join(name);
            match std::fs::read_to_string(&p) {
                Ok(t) => Ok(Some(t)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(SpecError::Io {
                    path: p.display().to_string(),
                    source,
                }),
            }
        };
        let exists = |rel: &str| dir.join(rel).is_file();
        Task::assemble(TaskOrigin::Folder(dir.clone()), &read, &exists)
    }

    /// Loads the built-in task `name` (a folder of `tasks/` embedded at build time), as
    /// [`Task::load_folder`] would load that folder.
    pub fn load_builtin(name: &str) -> Result<Task, SpecError> {
        let read = |file: &str| -> Result<Option<String>, SpecError> { Ok(builtin_file(name, file)) };
        let exists = |rel: &str| BUILTIN_TASKS.get_file(format!("{name}/{rel}")).is_some();
        Task::assemble(TaskOrigin::Builtin(name.to_string()), &read, &exists)
    }

    pub(crate) fn assemble(
        origin: TaskOrigin,
        read: &dyn Fn(&str) -> Result<Option<String>, SpecError>,
        exists: &dyn Fn(&str) -> bool,
    ) -> Result<Task, SpecError> {
        let display = |name: &str| display_path(&origin, name);
        let def_file = display("definition.json");
        let def_text = read("definition.json")?
            .ok_or_else(|| SpecError::one(&def_file, "", "not found; a task folder needs definition.json"))?;
        let definition = Definition::parse(&def_file, &def_text)?;
        // Everything below depends on the definition alone, so its problems are gathered and
        // reported together (a folder with several problems names them all), not one per try.
        let mut problems: Vec<crate::error::Problem> = Vec::new();
        let wl_file = display("workloads.jsonl");
        let workloads = gather(
            read("workloads.jsonl")?
                .ok_or_else(|| SpecError::one(&wl_file, "", "not found; a task folder needs workloads.jsonl"))
                .and_then(|text| parse_workloads(&wl_file, &text, &definition, exists)),
            &mut problems,
        )?;
        let config = match read("task.toml")? {
            Some(text) => TaskConfig::parse(&display("task.toml"), &text, &definition),
            None => Ok(TaskConfig::default()),
        };
        let Some(config) = gather(config, &mut problems)? else {
            return Err(SpecError::Invalid(problems));
        };
        let seed = gather(
            (|| -> Result<Option<SourceFile>, SpecError> {
                let Some(rel) = &config.kernel.seed else {
                    return Ok(None);
                };
                let content = read(rel)?.ok_or_else(|| {
                    SpecError::one(
                        display("task.toml"),
                        "kernel.seed",
                        format!("'{rel}' does not exist in the task folder"),
                    )
                })?;
                let file_name = Path::new(rel)
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| rel.clone());
                Ok(Some(SourceFile {
                    path: file_name,
                    content,
                }))
            })(),
            &mut problems,
        )?
        .flatten();
        let template = gather(
            (|| -> Result<Option<KernelTemplate>, SpecError> {
                match (&config.kernel.template, &config.kernel.knobs) {
                    (None, None) => Ok(None),
                    (Some(t), Some(k)) => {
                        let missing = |rel: &str| {
                            SpecError::one(
                                display("task.toml"),
                                "kernel",
                                format!("'{rel}' does not exist in the task folder"),
                            )
                        };
                        let source = read(t)?.ok_or_else(|| missing(t))?;
                        let space = KnobSpace::parse(&display(k), &read(k)?.ok_or_else(|| missing(k))?)?;
                        let name = Path::new(t)
                            .file_name()
                            .map(|n| n.to_string_lossy().to_string())
                            .unwrap_or_default();
                        let file = name.strip_suffix(".j2").unwrap_or(&name).to_string();
                        let template = KernelTemplate { file, source, space };
                        template.validate(&display(t))?;
                        Ok(Some(template))
                    }
                    _ => Err(SpecError::one(
                        display("task.toml"),
                        "kernel",
                        "`template` and `knobs` go together: give both or neither",
                    )),
                }
            })(),
            &mut problems,
        )?
        .flatten();
        let mut baselines = Vec::new();
        for (i, b) in config.baselines.iter().enumerate() {
            let content = read(&b.file)?.ok_or_else(|| {
                SpecError::one(
                    display("task.toml"),
                    format!("baselines[{i}].file"),
                    format!("'{}' does not exist in the task folder", b.file),
                )
            });
            let Some(content) = gather(content, &mut problems)? else {
                continue;
            };
            let language = b.language.or_else(|| {
                // A Python baseline is native framework code (PyTorch, MLX ops) unless the
                // task author says it is a Triton kernel.
                crate::solution::language_of(&b.file).map(|l| match l {
                    Language::Triton => Language::Python,
                    other => other,
                })
            });
            let Some(language) = language else {
                continue; // the config's check has reported it (no language, no extension)
            };
            let calling = b.calling.unwrap_or(config.kernel.calling);
            let path = Path::new(&b.file)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_else(|| b.file.clone());
            baselines.push(Solution {
                name: b.name.clone(),
                definition: definition.name.clone(),
                author: Some("baseline".into()),
                spec: BuildSpec {
                    language,
                    target_hardware: Vec::new(),
                    entry_point: format!("{path}::{}", b.entry),
                    dependencies: Vec::new(),
                    destination_passing_style: calling == crate::task_config::Calling::Dps,
                    binding: crate::solution::Binding::default_for(language),
                },
                sources: vec![SourceFile { path, content }],
                description: b.description.clone(),
            });
        }
        // Relative run directories start from the task folder (the current directory for a
        // built-in task, which has none).
        let task_dir = match &origin {
            TaskOrigin::Folder(dir) => Some(dir.as_path()),
            TaskOrigin::Dataset(files) => Some(files.root.as_path()),
            TaskOrigin::Builtin(_) => None,
        };
        let expertise = gather(
            crate::expertise::load(&config.expertise, read, task_dir, &display("task.toml")),
            &mut problems,
        )?;
        let (Some(workloads), Some(expertise), true) = (workloads, expertise, problems.is_empty()) else {
            return Err(SpecError::Invalid(problems));
        };
        Ok(Task {
            origin,
            definition,
            workloads,
            config,
            seed,
            template,
            baselines,
            expertise,
        })
    }

    /// The baseline named `name` in task.toml's `[[baselines]]`.
    pub fn baseline(&self, name: &str) -> Result<&Solution, SpecError> {
        self.baselines.iter().find(|b| b.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.baselines.iter().map(|b| b.name.as_str()).collect();
            SpecError::one(
                self.file("task.toml"),
                "baselines",
                if known.is_empty() {
                    format!("has no baseline '{name}' (the task declares none)")
                } else {
                    format!("has no baseline '{name}' (declared: {})", known.join(", "))
                },
            )
        })
    }

    /// How to name one of this task's files in messages.
    pub fn file(&self, name: &str) -> String {
        display_path(&self.origin, name)
    }

    /// The folder on disk that safetensors paths are relative to: the task folder, or a
    /// dataset's root.
    pub fn dir(&self) -> Option<&Path> {
        match &self.origin {
            TaskOrigin::Folder(p) => Some(p),
            TaskOrigin::Dataset(files) => Some(&files.root),
            TaskOrigin::Builtin(_) => None,
        }
    }
}

fn display_path(origin: &TaskOrigin, name: &str) -> String {
    match origin {
        TaskOrigin::Folder(dir) => dir.join(name).display().to_string(),
        TaskOrigin::Builtin(task) => format!("tasks/{task}/{name} (built-in)"),
        TaskOrigin::Dataset(files) => crate::dataset::display(files, name),
    }
}

/// `result`'s value; its validation problems are added to `problems` instead (`None`), so that
/// independent parts of a task are all checked; an error that is not a validation failure (a
/// file that cannot be read) ends the load at once.
fn gather<T>(result: Result<T, SpecError>, problems: &mut Vec<crate::error::Problem>) -> Result<Option<T>, SpecError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(SpecError::Invalid(mut found)) => {
            problems.append(&mut found);
            Ok(None)
        }
        Err(other) => Err(other),
    }
}

/// A file of the built-in task `task` (`rel` relative to its folder), if both exist.
pub(crate) fn builtin_file(task: &str, rel: &str) -> Option<String> {
    BUILTIN_TASKS
        .get_file(format!("{task}/{rel}"))
        .and_then(|f| f.contents_utf8())
        .map(str::to_string)
}

/// Every file of the built-in task `name`, as (path relative to its folder, contents), sorted by
/// path; `None` when there is no such task.
pub fn builtin_task_files(name: &str) -> Option<Vec<(String, Vec<u8>)>> {
    fn walk(dir: &Dir<'static>, root: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for f in dir.files() {
            if let Ok(rel) = f.path().strip_prefix(root) {
                out.push((rel.to_string_lossy().to_string(), f.contents().to_vec()));
            }
        }
        for d in dir.dirs() {
            walk(d, root, out);
        }
    }
    if name.contains('/') {
        return None;
    }
    let dir = BUILTIN_TASKS.get_dir(name)?;
    let mut out = Vec::new();
    walk(dir, dir.path(), &mut out);
    out.sort();
    Some(out)
}

/// Names of the tasks compiled into the binary, sorted.
pub fn builtin_names() -> Vec<String> {
    let mut names: Vec<String> = BUILTIN_TASKS
        .dirs()
        .filter(|d| d.get_file(d.path().join("definition.json")).is_some())
        .filter_map(|d| d.path().file_name().map(|n| n.to_string_lossy().to_string()))
        .collect();
    names.sort();
    names
}
