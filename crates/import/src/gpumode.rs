//! GPU MODE task folders: task.yml (`files`, `lang`, `tests` and `benchmarks` as argument
//! dicts), reference.py (`ref_kernel(data)`, `generate_input(**args)`, `check_implementation`),
//! submissions exposing `custom_kernel(data)`.

use crate::axes::{self, Hint};
use crate::draws::{self, Draw};
use crate::emit::{self, Folder};
use crate::error::ImportError;
use crate::gpumode_calls::{self, Call};
use crate::gpumode_files::{prelude, resolve_files, seed_entry, stub, MODULES};
use crate::gpumode_given;
use crate::gpumode_toml::{atol_for, task_toml, tolerance, KernelTable};
use crate::probe::{self, GpuModeProbe, Value};
use crate::{Imported, Options};
use indexmap::IndexMap;
use ksearch_spec::{DType, Definition};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct TaskYml {
    #[serde(default)]
    files: Vec<FileEntry>,
    #[serde(default)]
    lang: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    tests: Vec<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    benchmarks: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Seconds GPU MODE gives a submission's tests and its benchmarks.
    #[serde(default)]
    test_timeout: Option<f64>,
    #[serde(default)]
    benchmark_timeout: Option<f64>,
    #[serde(default)]
    config: Option<TaskConfig>,
}

/// task.yml's `config`: the folder's main harness file (its eval.py), where `--entry` reads the
/// generator's arguments no test gives.
#[derive(Deserialize)]
struct TaskConfig {
    #[serde(default)]
    main: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct FileEntry {
    pub(crate) name: String,
    pub(crate) source: String,
}

/// Imports the GPU MODE task folder `folder` into `opts.out`.
pub fn import_gpumode(folder: &Path, opts: &Options) -> Result<Imported, ImportError> {
    let yml_path = folder.join("task.yml");
    let yml_file = crate::shown(&yml_path);
    if !folder.is_dir() {
        return Err(ImportError::io(
            folder,
            std::io::Error::other("is not a folder (a GPU MODE task folder holds task.yml)"),
        ));
    }
    let text = std::fs::read_to_string(&yml_path).map_err(|e| ImportError::io(&yml_path, e))?;
    let bad = |field: &str, message: String| ImportError::TaskYml {
        file: yml_file.clone(),
        field: field.to_string(),
        message,
    };
    let yml: TaskYml = yaml_serde::from_str(&text).map_err(|e| bad("", format!("not a valid task.yml: {e}")))?;
    match yml.lang.as_deref() {
        None | Some("py") => {}
        Some(other) => {
            return Err(bad(
                "lang",
                format!(
                    "'{other}': only Python tasks (lang \"py\", submissions defining custom_kernel) can be imported"
                ),
            ))
        }
    }
    let mut calls: Vec<Call> = Vec::new();
    for (list, entries) in [("tests", &yml.tests), ("benchmarks", &yml.benchmarks)] {
        for (i, args) in entries.iter().enumerate() {
            for (k, v) in args {
                check_argument(&format!("{list}[{i}].{k}"), v).map_err(|(field, message)| bad(&field, message))?;
            }
            let singular = list.trim_end_matches('s');
            calls.push((format!("{singular}-{i}"), args.clone()));
        }
    }
    if calls.is_empty() {
        return Err(bad(
            "tests",
            "lists no tests and no benchmarks; each becomes a workload".into(),
        ));
    }

    let (reference_path, helpers) = resolve_files(folder, &yml.files, &bad)?;
    let reference_file = crate::shown(&reference_path);
    let reference = std::fs::read_to_string(&reference_path).map_err(|e| ImportError::io(&reference_path, e))?;
    let absolute = |p: &Path| std::fs::canonicalize(p).map_err(|e| ImportError::io(p, e));
    let mut modules = serde_json::Map::new();
    let mut helper_sources: Vec<(String, String)> = Vec::new();
    for h in &helpers {
        match &h.path {
            Some(p) => {
                modules.insert(h.name.clone(), absolute(p)?.display().to_string().into());
                helper_sources.push((
                    h.name.clone(),
                    std::fs::read_to_string(p).map_err(|e| ImportError::io(p, e))?,
                ));
            }
            None => {
                modules.insert(h.name.clone(), serde_json::Value::Null);
                helper_sources.push((h.name.clone(), stub(&h.name).to_string()));
            }
        }
    }
    // generate_input's own values of the inputs it computes are written here (gpumode_given).
    let scratch = tempfile::tempdir().map_err(|e| ImportError::io(&std::env::temp_dir(), e))?;
    let request = serde_json::json!({
        "kind": "gpumode",
        "file": absolute(&reference_path)?.display().to_string(),
        "modules": modules,
        "calls": calls.iter().map(|(_, a)| serde_json::Value::Object(a.clone())).collect::<Vec<_>>(),
        "save_dir": scratch.path().display().to_string(),
        "entry": opts.entry,
        "main": yml
            .config
            .as_ref()
            .and_then(|c| c.main.as_deref())
            .map(|m| folder.join(m))
            .filter(|p| p.is_file())
            // The probe runs in a scratch directory: a path relative to here would not resolve.
            .map(|p| absolute(&p).map(|p| p.display().to_string()))
            .transpose()?,
    });
    let mut found: GpuModeProbe = probe::run(&reference_path, request, opts)?;
    let unsupported = |message: String| ImportError::Unsupported {
        file: reference_file.clone(),
        message,
    };
    // Tests whose values have other dtypes than most are left out (the report says which).
    let kept = gpumode_calls::choose(&found, &calls).map_err(unsupported)?;
    let keep = |i: &usize| kept.indices.contains(i);
    found.calls = std::mem::take(&mut found.calls)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, c)| c)
        .collect();
    let calls: Vec<Call> = calls
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep(i))
        .map(|(_, c)| c)
        .collect();
    let first = &found.calls[0];
    let bare = first.bare;
    let inputs = match &first.leaf_names {
        Some(names) => names.clone(),
        None => crate::input_names(found.input_names.as_deref(), first.inputs.len()),
    };
    let outputs = crate::output_names(first.outputs.len(), &inputs);

    // Axes over all workloads, named after the test arguments where they match.
    let mut tensors = Vec::new();
    for (j, name) in inputs.iter().enumerate() {
        if matches!(first.inputs[j], Value::Tensor { .. }) {
            tensors.push((name.clone(), found.calls.iter().map(|c| shape(&c.inputs[j])).collect()));
        }
    }
    for (j, name) in outputs.iter().enumerate() {
        tensors.push((name.clone(), found.calls.iter().map(|c| shape(&c.outputs[j])).collect()));
    }
    let mut keys: Vec<&String> = Vec::new();
    for (_, args) in &calls {
        for k in args.keys() {
            if !keys.contains(&k) && k != "seed" {
                keys.push(k);
            }
        }
    }
    let hints = argument_hints(&keys, &calls);
    let plan = axes::plan(&tensors, &hints, calls.len()).map_err(unsupported)?;

    let dtype = |v: &Value, what: &str| -> Result<DType, ImportError> {
        let name = match v {
            Value::Tensor { dtype, .. } | Value::Scalar { dtype, .. } => dtype,
        };
        draws::dtype(name).ok_or_else(|| unsupported(format!("{what} has dtype {name}, which ksearch has no name for")))
    };
    let mut def_inputs = IndexMap::new();
    let mut chosen: Vec<(String, Draw)> = Vec::new();
    let mut writable: Vec<String> = Vec::new();
    for (j, name) in inputs.iter().enumerate() {
        let what = if first.rebuild.is_some() {
            format!("'{name}' of the value generate_input returns")
        } else if bare {
            "what generate_input returns".to_string()
        } else {
            format!("element {j} of the tuple generate_input returns")
        };
        let d = dtype(&first.inputs[j], &what)?;
        if matches!(first.inputs[j], Value::Tensor { .. }) {
            def_inputs.insert(name.clone(), crate::tensor_spec(plan.shapes[name].clone(), d, what));
            let made: Vec<&Value> = found.calls.iter().map(|c| &c.inputs[j]).collect();
            if draws::is_output_buffer(&made) {
                writable.push(name.clone());
            }
            chosen.push((name.clone(), draws::choose(name, d, &made, &plan, "generate_input")));
        } else {
            def_inputs.insert(name.clone(), crate::scalar_spec(d, what));
        }
    }
    let mut def_outputs = IndexMap::new();
    let mut output_dtypes: Vec<DType> = Vec::new();
    for (j, name) in outputs.iter().enumerate() {
        let what = format!("ref_kernel's output {j}");
        let d = dtype(&first.outputs[j], &what)?;
        if !output_dtypes.contains(&d) {
            output_dtypes.push(d);
        }
        def_outputs.insert(name.clone(), crate::tensor_spec(plan.shapes[name].clone(), d, what));
    }

    // Workloads: one per test and benchmark, without repeats of the same sizes.
    let mut workloads: Vec<(usize, serde_json::Value)> = Vec::new();
    let mut seen: Vec<serde_json::Value> = Vec::new();
    let mut repeats = 0;
    for (w, (uuid, _)) in calls.iter().enumerate() {
        let mut given = serde_json::Map::new();
        for (j, name) in inputs.iter().enumerate() {
            if let Value::Scalar { value, .. } = &found.calls[w].inputs[j] {
                given.insert(name.clone(), serde_json::json!({"type": "scalar", "value": value}));
            }
        }
        let key = serde_json::json!([plan.var_values[w], given]);
        if seen.contains(&key) {
            repeats += 1;
            continue;
        }
        seen.push(key);
        workloads.push((
            w,
            serde_json::json!({"uuid": uuid, "axes": plan.var_values[w], "inputs": given}),
        ));
    }
    // Workloads where an output is zero whatever the inputs (measured at import) are left out.
    let atols: Vec<(String, Option<f64>)> = outputs
        .iter()
        .zip(&first.outputs)
        .map(|(name, v)| (name.clone(), dtype(v, "").ok().and_then(|d| atol_for(&found, d))))
        .collect();
    let candidates: Vec<usize> = workloads.iter().map(|(w, _)| *w).collect();
    let zeros = gpumode_calls::zero_workloads(&found, &calls, &candidates, &atols);
    if !zeros.dropped.is_empty() && zeros.dropped.len() == workloads.len() {
        return Err(ImportError::Uncheckable {
            file: reference_file.clone(),
            message: format!(
                "every test and benchmark has an output of ref_kernel that is zero everywhere: {}. No tolerance can \
                 tell a correct kernel from one that writes zeros, and ksearch eval refuses such a reference; this is \
                 the problem's own data (its generate_input and ref_kernel), not ksearch's draws",
                zeros
                    .dropped
                    .iter()
                    .map(|(_, why)| why.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    let left_out: Vec<String> = zeros.dropped.iter().map(|(_, why)| why.clone()).collect();
    let mut workloads: Vec<(usize, serde_json::Value)> = workloads
        .into_iter()
        .filter(|(w, _)| !zeros.dropped.iter().any(|(d, _)| d == w))
        .collect();
    let given = gpumode_given::give(&found, &inputs, &mut chosen, &mut workloads, scratch.path());
    let workloads: Vec<serde_json::Value> = workloads
        .into_iter()
        .filter(|(w, _)| !given.dropped.contains(w))
        .map(|(_, v)| v)
        .collect();

    let folder_name = folder
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| "gpumode_task".into());
    // One task per reference function: `cross_entropy_py-forward` for reference_forward.
    let default_name = match &found.entry {
        Some(e) => format!(
            "{folder_name}-{}",
            e.function
                .strip_prefix("reference_")
                .or_else(|| e.function.strip_prefix("ref_"))
                .filter(|s| !s.is_empty())
                .unwrap_or(&e.function)
        ),
        None => folder_name.clone(),
    };
    let def_name: String = opts
        .name
        .clone()
        .unwrap_or(default_name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let function = found.entry.as_ref().map_or("ref_kernel", |e| e.function.as_str());
    let description = format!(
        "GPU MODE task {folder_name}: {function}{} of its reference.py, where data is {}. {}",
        if found.entry.is_some() { "(*data)" } else { "(data)" },
        if bare {
            "the tensor generate_input returns".to_string()
        } else {
            format!("the tuple ({}) generate_input returns", inputs.join(", "))
        },
        yml.description.as_deref().unwrap_or("").trim()
    );
    let description = if left_out.is_empty() {
        description
    } else {
        format!(
            "{}\n\nLeft out by ksearch import: {}.",
            description.trim(),
            left_out.join("; ")
        )
    };
    let prelude = prelude(&helper_sources);
    let call_args = if let Some(rebuild) = &first.rebuild {
        rebuild.clone()
    } else if found.entry.is_some() {
        format!("*({},)", inputs.join(", "))
    } else if bare {
        inputs[0].clone()
    } else if inputs.len() == 1 {
        format!("({},)", inputs[0])
    } else {
        format!("({})", inputs.join(", "))
    };
    let reference_src = format!(
        "{}{prelude}\n_ksearch_reference = _ksearch_types.ModuleType(\"ksearch_gpumode_reference\")\n\
         _ksearch_reference.__file__ = \"reference.py\"\n\
         exec(compile({}, \"reference.py\", \"exec\"), _ksearch_reference.__dict__)\n\n\n\
         def run({}):\n    return _ksearch_reference.{function}({call_args})\n",
        emit::comment(&format!(
            "Imported from GPU MODE task {folder_name} by `ksearch import gpumode`. run(**inputs) calls reference.py's \
             {function} on the inputs as {} returns them; reference.py runs in a module of its own, after \
             the folder's helper modules are registered.",
            found.entry.as_ref().map_or("generate_input", |e| e.generator.as_str())
        )),
        emit::py_str(&reference),
        inputs.join(", ")
    );
    let definition = Definition {
        name: def_name.clone(),
        op_type: "gpumode".into(),
        description: Some(description.trim().to_string()),
        tags: vec!["source:gpumode".into()],
        axes: plan.axes.clone(),
        constraints: Vec::new(),
        inputs: def_inputs,
        outputs: def_outputs,
        reference: reference_src,
    };
    // The seed is reference.py as is: the helper modules are files of the task folder on the
    // candidate's module path (`[kernel].python_path`), not code registered by the seed, which
    // ksearch's static checks would refuse (a candidate must not reach into `__dict__`).
    let seed = format!(
        "{}{}\n\n\n# --- added by ksearch import ---\n{}",
        emit::comment(&format!(
            "Imported from GPU MODE task {folder_name} by `ksearch import gpumode`: reference.py's ref_kernel as the \
             starting candidate custom_kernel(data){}. The folder's helper modules (task, utils) are in the task's \
             {MODULES}/ folder, on the candidate's module path, so GPU MODE submissions' `from task import ...` works.",
            match &found.entry {
                Some(e) => format!(" (reference.py's {} here, called on the inputs in data)", e.function),
                None => String::new(),
            }
        )),
        without_backend_settings(found.seed_source.as_deref().unwrap_or(&reference).trim_end()),
        seed_entry(
            first.rebuild.as_deref(),
            &inputs,
            found.entry.as_ref().map(|e| e.function.as_str())
        )
    );
    let mut checks_list: Vec<String> = found.notes.clone();
    checks_list.extend(kept.note.iter().cloned());
    checks_list.extend(left_out.iter().cloned());
    checks_list.extend(zeros.notes.iter().cloned());
    if !found.seed_dropped.is_empty() {
        checks_list.push(format!(
            "the seed is reference.py without what {function} does not use ({}): a checker's code is not the kernel's",
            found.seed_dropped.join(", ")
        ));
    }
    if found.engine == "stand-in" {
        checks_list.push(
            "shapes were found with ksearch's stand-in for PyTorch (no PyTorch here); bench/import_check.sh \
             re-imports with PyTorch and evaluates the seed"
                .into(),
        );
    }
    for h in &helpers {
        if h.path.is_none() {
            checks_list.push(format!(
                "{}.py is not in the folder: ksearch wrote a stub module for it (docs/importers.md)",
                h.name
            ));
        }
    }
    checks_list.extend(chosen.iter().filter_map(|(_, d)| d.note.clone()));
    checks_list.extend(given.notes.iter().cloned());
    if let Some(e) = &found.entry {
        checks_list.push(format!(
            "--entry {}: one of reference.py's reference functions as the task's kernel; the inputs are {}",
            e.function, e.how
        ));
        if !e.fixed.is_empty() {
            checks_list.push(format!(
                "{} also takes {}, which no test or benchmark gives: {}, as {} calls it",
                e.generator,
                e.fixed.keys().cloned().collect::<Vec<_>>().join(", "),
                e.fixed
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                e.fixed_from.as_deref().unwrap_or("the folder's main harness file")
            ));
        }
    }
    let (tolerance_toml, tolerance_note) = tolerance(&found, &output_dtypes);
    checks_list.push(tolerance_note);
    checks_list.push(format!(
        "generate_input's seed argument is not used: ksearch draws its own inputs per trial and timing call{}",
        if given.blobs.is_empty() {
            ""
        } else {
            " (but for the computed inputs the workloads give)"
        }
    ));
    if first.rebuild.is_some() {
        checks_list.push(format!(
            "generate_input returns dicts, nested tuples or lists: custom_kernel(data) gets them flattened, data = \
             ({}), and the seed rebuilds the original value for ref_kernel (unlike GPU MODE, where data is that value)",
            inputs.join(", ")
        ));
    }
    if repeats > 0 {
        checks_list.push(format!(
            "{repeats} test(s) or benchmark(s) repeated the sizes of an earlier one and were left out"
        ));
    }
    checks_list.push(
        "not carried over: the ranking (ranking_by), templates and eval.py of task.yml; every test and \
         benchmark is a workload, timed alike"
            .into(),
    );
    let calling = if bare { "returns" } else { "tuple" };
    // GPU MODE runs a submission's tests and its benchmarks under a limit each; one ksearch
    // evaluation does both, so it gets their sum (never less than ksearch's default).
    let timeout = match (yml.test_timeout, yml.benchmark_timeout) {
        (None, None) => String::new(),
        (t, b) => {
            let sum = t.unwrap_or(0.0) + b.unwrap_or(0.0);
            let secs = sum.max(ksearch_spec::EvaluationConfig::default().timeout_s);
            checks_list.push(format!(
                "the evaluation's time limit is {secs:.0} s: task.yml's test_timeout plus benchmark_timeout"
            ));
            format!(
                "{}timeout_s = {}\n",
                emit::comment(&format!(
                    "task.yml's test_timeout ({}) plus benchmark_timeout ({}): GPU MODE's limits for a submission.",
                    t.map_or("none".into(), |v| format!("{v} s")),
                    b.map_or("none".into(), |v| format!("{v} s"))
                )),
                emit::toml_float(secs)
            )
        }
    };
    let task_toml = task_toml(
        &folder_name,
        &found.engine,
        &chosen,
        &format!("{timeout}{tolerance_toml}"),
        &KernelTable {
            calling,
            writable: &writable,
            helper_modules: helper_sources.iter().map(|(name, _)| name.as_str()).collect(),
        },
        kept.note
            .iter()
            .chain(&left_out)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
    );

    let folder_out = Folder {
        definition,
        workloads: workloads.clone(),
        task_toml,
        files: std::iter::once(("seed.py".to_string(), seed))
            .chain(
                helper_sources
                    .iter()
                    .map(|(name, source)| (format!("{MODULES}/{name}.py"), source.clone())),
            )
            .collect(),
        blobs: given.blobs,
    };
    let task = folder_out.write(&opts.out, opts.force)?;
    let written = vec![
        (
            "definition.json".to_string(),
            format!(
                "{def_name}: inputs {}; outputs {}; axes {}",
                inputs.join(", "),
                outputs.join(", "),
                plan.axes.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ),
        (
            "workloads.jsonl".into(),
            format!(
                "{} workloads from {} tests and {} benchmarks",
                workloads.len(),
                yml.tests.len(),
                yml.benchmarks.len()
            ),
        ),
        (
            "task.toml".into(),
            format!("language python, entry custom_kernel, calling {calling}"),
        ),
        (
            "seed.py".into(),
            format!("reference.py's {function} as custom_kernel (passes: it is the reference)"),
        ),
    ];
    Ok(Imported {
        task,
        dir: opts.out.clone(),
        source: format!("GPU MODE task {}", crate::shown(folder)),
        engine: found.engine,
        written,
        checks: checks_list,
    })
}

/// A task.yml argument is a number, string or boolean, or a list of them, nested lists too
/// (GPU MODE's group GEMM: `m: [96, 128]`); generate_input gets a list as a tuple, as GPU MODE's
/// eval passes it. `Err((field, message))` names the element at fault (`tests[0].m[1]`).
fn check_argument(field: &str, value: &serde_json::Value) -> Result<(), (String, String)> {
    match value {
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_argument(&format!("{field}[{i}]"), item)?;
            }
            Ok(())
        }
        serde_json::Value::Object(_) | serde_json::Value::Null => Err((
            field.to_string(),
            format!(
                "{value} is not a number, string or boolean, nor a list of them (a test's arguments are passed \
                 to generate_input(**args); GPU MODE's eval reads numbers, words and lists)"
            ),
        )),
        _ => Ok(()),
    }
}

/// The integer arguments of the tests and benchmarks (list elements too, `m_0` for `m[0]`,
/// `shapes_1_0` for `shapes[1][0]`) with their value in every call: the names axes take.
fn argument_hints(keys: &[&String], calls: &[Call]) -> Vec<Hint> {
    fn integers(name: String, at: String, value: &serde_json::Value, out: &mut Vec<(String, String, i64)>) {
        match value {
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    integers(format!("{name}_{i}"), format!("{at}[{i}]"), item, out);
                }
            }
            v => {
                if let Some(n) = v.as_i64() {
                    out.push((name, at, n));
                }
            }
        }
    }
    let mut hints: Vec<Hint> = Vec::new();
    for k in keys {
        let per_call: Vec<Vec<(String, String, i64)>> = calls
            .iter()
            .map(|(_, args)| {
                let mut found = Vec::new();
                if let Some(v) = args.get(*k) {
                    integers((*k).clone(), (*k).clone(), v, &mut found);
                }
                found
            })
            .collect();
        let Some(first) = per_call.first() else {
            continue;
        };
        for (name, at, _) in first {
            let values: Option<Vec<i64>> = per_call
                .iter()
                .map(|found| found.iter().find(|(n, _, _)| n == name).map(|(_, _, v)| *v))
                .collect();
            let Some(values) = values else {
                continue;
            };
            let source = if at == *k {
                format!("the '{k}' argument of the tests and benchmarks")
            } else {
                format!("element {at} of the list argument '{k}' of the tests and benchmarks")
            };
            hints.push(Hint {
                name: name.clone(),
                values,
                source,
            });
        }
    }
    hints
}

fn shape(v: &Value) -> Vec<i64> {
    match v {
        Value::Tensor { shape, .. } => shape.clone(),
        Value::Scalar { .. } => Vec::new(),
    }
}

/// reference.py with its module-level `torch.backends.... = value` lines commented out, for the
/// seed: ksearch's static checks refuse a candidate that assigns to a module's attribute (it
/// could patch PyTorch itself), and the setting is made anyway, in the same process and before
/// the candidate loads, by the reference (the definition runs reference.py as it is).
pub(crate) fn without_backend_settings(reference: &str) -> String {
    let setting = regex::Regex::new(r"^torch\.backends\.[A-Za-z0-9_.]+\s*=[^=]").ok();
    reference
        .lines()
        .map(|line| match &setting {
            Some(re) if re.is_match(line) => format!(
                "# {line}  # ksearch: the reference (the task's definition) makes this setting before the candidate runs"
            ),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod backend_settings_tests {
    use super::without_backend_settings;

    #[test]
    fn module_level_backend_settings_leave_the_seed() {
        let reference = "import torch\ntorch.backends.cudnn.allow_tf32 = False\ntorch.backends.cuda.matmul.allow_tf32=False\n\
                         def f(x):\n    torch.backends.cudnn.benchmark = True\n    return x == 1\nflag = torch.backends.cudnn.enabled == True";
        let seed = without_backend_settings(reference);
        assert!(
            seed.contains("# torch.backends.cudnn.allow_tf32 = False  # ksearch:"),
            "{seed}"
        );
        assert!(
            seed.contains("# torch.backends.cuda.matmul.allow_tf32=False  # ksearch:"),
            "{seed}"
        );
        // Indented code and comparisons are the candidate's own business and stay.
        assert!(seed.contains("\n    torch.backends.cudnn.benchmark = True\n"), "{seed}");
        assert!(seed.ends_with("flag = torch.backends.cudnn.enabled == True"), "{seed}");
    }
}
