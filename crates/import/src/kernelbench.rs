//! KernelBench problem files: `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`.
//! Candidates are `ModelNew` classes built with the same arguments under the same torch seed.

use crate::axes::{self, Hint};
use crate::checks;
use crate::draws::{self, Draw};
use crate::emit::{self, Folder};
use crate::error::ImportError;
use crate::probe::{self, KernelBenchProbe, Value};
use crate::tolerances;
use crate::{Imported, Options};
use indexmap::IndexMap;
use ksearch_spec::{DType, Definition};
use regex::Regex;
use std::path::Path;

/// The torch seed set before building Model (reference) and ModelNew (candidates).
const INIT_SEED: u64 = 42;

/// Imports the KernelBench problem `file` into `opts.out`.
pub fn import_kernelbench(file: &Path, opts: &Options) -> Result<Imported, ImportError> {
    let shown = crate::shown(file);
    let source = std::fs::read_to_string(file).map_err(|e| ImportError::io(file, e))?;
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let absolute = std::fs::canonicalize(file).map_err(|e| ImportError::io(file, e))?;
    let request = serde_json::json!({
        "kind": "kernelbench",
        "file": absolute.display().to_string(),
        "seed": INIT_SEED,
    });
    let found: KernelBenchProbe = probe::run(file, request, opts)?;
    let unsupported = |message: String| ImportError::Unsupported {
        file: shown.clone(),
        message,
    };
    if found.inputs.is_empty() {
        return Err(unsupported(
            "get_inputs() returned no inputs; a task needs at least one".into(),
        ));
    }
    if found.inputs.iter().all(|v| matches!(v, Value::Scalar { .. })) {
        return Err(unsupported(
            "get_inputs() returned only numbers; a task needs at least one tensor input".into(),
        ));
    }
    let inputs = crate::input_names(found.input_names.as_deref(), found.inputs.len());
    let outputs = crate::output_names(found.outputs.len(), &inputs);
    let dtype_of = |v: &Value, what: &str| -> Result<DType, ImportError> {
        let name = match v {
            Value::Tensor { dtype, .. } | Value::Scalar { dtype, .. } => dtype,
        };
        draws::dtype(name).ok_or_else(|| unsupported(format!("{what} has dtype {name}, which ksearch has no name for")))
    };

    // Axes: every dimension is const (one workload); named after the module's constants.
    let mut tensors = Vec::new();
    for (name, v) in inputs
        .iter()
        .zip(&found.inputs)
        .chain(outputs.iter().zip(&found.outputs))
    {
        if let Value::Tensor { shape, .. } = v {
            tensors.push((name.clone(), vec![shape.clone()]));
        }
    }
    let hints: Vec<Hint> = found
        .int_globals
        .iter()
        .map(|(name, value)| Hint {
            name: name.clone(),
            values: vec![*value],
            source: format!(
                "{name} = {value} in {}",
                file.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
            ),
        })
        .collect();
    let plan = axes::plan(&tensors, &hints, 1).map_err(unsupported)?;

    let mut def_inputs = IndexMap::new();
    let mut scalars = serde_json::Map::new();
    let mut chosen: Vec<(String, Draw)> = Vec::new();
    for (i, (name, v)) in inputs.iter().zip(&found.inputs).enumerate() {
        let dtype = dtype_of(v, &format!("get_inputs()[{i}]"))?;
        let what = format!("get_inputs()[{i}], argument {} of Model.forward", i + 1);
        match v {
            Value::Tensor { .. } => {
                def_inputs.insert(name.clone(), crate::tensor_spec(plan.shapes[name].clone(), dtype, what));
                chosen.push((name.clone(), draws::choose(name, dtype, &[v], &plan, "get_inputs()")));
            }
            Value::Scalar { value, .. } => {
                def_inputs.insert(name.clone(), crate::scalar_spec(dtype, what));
                scalars.insert(name.clone(), serde_json::json!({"type": "scalar", "value": value}));
            }
        }
    }
    let mut def_outputs = IndexMap::new();
    for (i, (name, v)) in outputs.iter().zip(&found.outputs).enumerate() {
        let dtype = dtype_of(v, &format!("Model.forward's output {i}"))?;
        def_outputs.insert(
            name.clone(),
            crate::tensor_spec(plan.shapes[name].clone(), dtype, format!("Model.forward's output {i}")),
        );
    }

    let def_name = opts.name.clone().unwrap_or_else(|| stem.clone());
    let def_name: String = def_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let file_name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let init_py = crate::py_literal(&serde_json::Value::Array(found.init.clone()));
    let description = format!(
        "KernelBench problem {file_name}: the output of the PyTorch module Model (built with arguments {init_py} \
         under torch.manual_seed({INIT_SEED})) applied to the inputs in get_inputs() order. Candidates define a \
         class ModelNew with Model's constructor and forward signature; ksearch builds it the same way, so \
         parameters created in the same order get the same values."
    );
    let measured: Vec<(String, DType, Option<f64>)> = def_outputs
        .iter()
        .enumerate()
        .map(|(i, (name, spec))| (name.clone(), spec.dtype, found.largest.get(i).copied().flatten()))
        .collect();
    let definition = Definition {
        name: def_name.clone(),
        op_type: "kernelbench".into(),
        description: Some(description),
        tags: vec!["source:kernelbench".into()],
        axes: plan.axes.clone(),
        constraints: Vec::new(),
        inputs: def_inputs,
        outputs: def_outputs,
        reference: reference_source(&file_name, &source, &inputs, &init_py),
    };
    let workloads = vec![serde_json::json!({"uuid": def_name, "axes": {}, "inputs": scalars})];

    let seed = seed_source(&file_name, &source, &init_py);
    let rules = checks::kernelbench_rules(&stem, &seed);
    let init_toml = emit::toml_value(&serde_json::Value::Array(found.init.clone())).ok_or_else(|| {
        unsupported(format!(
            "get_init_inputs() returned {init_py}; task.toml cannot hold None or dictionaries in [kernel].init.args"
        ))
    })?;
    let (tolerance_toml, tolerance_notes) = tolerances::kernelbench(&measured);
    let mut task_toml = task_toml(&file_name, &found.engine, &chosen, &rules, &init_toml);
    task_toml.push_str(&tolerance_toml);

    let folder = Folder {
        definition,
        workloads,
        task_toml,
        files: vec![
            ("seed.py".into(), seed),
            ("baselines/pytorch.py".into(), source.clone()),
        ],
    };
    let task = folder.write(&opts.out, opts.force)?;

    let shapes = |names: &[String], values: &[Value]| -> String {
        names
            .iter()
            .zip(values)
            .map(|(n, v)| match v {
                Value::Tensor { shape, dtype, .. } => format!("{n} {dtype}{shape:?}"),
                Value::Scalar { dtype, value } => format!("{n} {dtype} = {value}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let written = vec![
        (
            "definition.json".to_string(),
            format!(
                "{def_name}: inputs {}; outputs {}",
                shapes(&inputs, &found.inputs),
                shapes(&outputs, &found.outputs)
            ),
        ),
        (
            "workloads.jsonl".into(),
            "1 workload (KernelBench problems have one input size)".into(),
        ),
        (
            "task.toml".into(),
            format!(
                "language python, entry ModelNew, calling returns, init ModelNew(*{init_py}) under torch seed \
                 {INIT_SEED}, {} forbidden patterns",
                rules.rules.len()
            ),
        ),
        (
            "seed.py".into(),
            "the problem's Model renamed ModelNew (passes: it is the reference)".into(),
        ),
        (
            "baselines/pytorch.py".into(),
            "the problem file as is: baseline 'pytorch' (PyTorch eager)".into(),
        ),
    ];
    let mut checks_list: Vec<String> = found.notes.clone();
    if found.engine == "stand-in" {
        checks_list.push(
            "shapes were found with ksearch's stand-in for PyTorch (no PyTorch here); bench/import_check.sh \
             re-imports with PyTorch and evaluates the seed"
                .into(),
        );
    }
    checks_list.extend(chosen.iter().filter_map(|(_, d)| d.note.clone()));
    if chosen.iter().any(|(_, d)| d.distribution.is_none() && d.note.is_none()) {
        checks_list.push(
            "float inputs made with torch.randn are drawn from ksearch's trial distributions (normal, uniform, \
             heavy-tailed), a wider test than the problem's normal inputs"
                .into(),
        );
    }
    checks_list.push(
        "the reference runs the problem's Model, moved with its parameters and buffers to the inputs' device; \
         KernelBench's own tolerances (fp32 1e-4, fp16/bf16 1e-2) are ksearch's defaults"
            .into(),
    );
    checks_list.extend(tolerance_notes);
    if !rules.allowed.is_empty() {
        checks_list.push(format!(
            "candidates may still call: {}; tighten [checks].forbidden in task.toml once the seed no longer needs them",
            rules.allowed.join("; ")
        ));
    }
    Ok(Imported {
        task,
        dir: opts.out.clone(),
        source: format!("KernelBench problem {shown}"),
        engine: found.engine,
        written,
        checks: checks_list,
    })
}

/// The definition's reference: the problem file as is, then `run` building Model once.
fn reference_source(file_name: &str, source: &str, inputs: &[String], init_py: &str) -> String {
    let args = inputs.join(", ");
    format!(
        "{header}\n{source}\n\n# --- added by ksearch import ---\nimport torch as _ksearch_torch\n\n_ksearch_model = None\n_ksearch_on = None\n\n\n\
         def run({args}):\n    global _ksearch_model, _ksearch_on\n    if _ksearch_model is None:\n        \
         _ksearch_torch.manual_seed({INIT_SEED})\n        _ksearch_model = Model(*{init_py})\n    \
         # The model's parameters and buffers go where the inputs are (the harness may hand it GPU tensors).\n    \
         _ksearch_device = next((a.device for a in ({args},) if isinstance(a, _ksearch_torch.Tensor)), None)\n    \
         if _ksearch_device is not None and _ksearch_device != _ksearch_on and hasattr(_ksearch_model, \"to\"):\n        \
         _ksearch_model = _ksearch_model.to(_ksearch_device)\n        _ksearch_on = _ksearch_device\n    \
         with _ksearch_torch.no_grad():\n        return _ksearch_model({args})\n",
        header = emit::comment(&format!(
            "Imported from KernelBench problem {file_name} by `ksearch import kernelbench`. run(**inputs) calls the \
             problem's Model, built once from get_init_inputs()'s values under torch.manual_seed({INIT_SEED}), on the \
             inputs in get_inputs() order. The problem file follows as is."
        )),
        source = source.trim_end(),
    )
}

/// The seed: the problem file with every `Model` renamed `ModelNew`.
fn seed_source(file_name: &str, source: &str, init_py: &str) -> String {
    let model = Regex::new(r"\bModel\b").unwrap_or_else(|e| panic!("built-in pattern: {e}"));
    let renamed = model.replace_all(source, "ModelNew");
    format!(
        "{}\n{}\n",
        emit::comment(&format!(
            "Imported from KernelBench problem {file_name} by `ksearch import kernelbench`: the problem's module, \
             renamed ModelNew, as the starting candidate. ksearch builds ModelNew(*{init_py}) under \
             torch.manual_seed({INIT_SEED}), as it builds the reference, so parameters created in the same order \
             get the same values."
        )),
        renamed.trim_end()
    )
}

fn task_toml(file_name: &str, engine: &str, chosen: &[(String, Draw)], rules: &checks::RuleSet, init: &str) -> String {
    let mut t = emit::comment(&format!(
        "Imported from KernelBench problem {file_name} by `ksearch import kernelbench` (shapes found with {}). \
         docs/importers.md says what is carried over and what is not.",
        if engine == "stand-in" {
            "ksearch's stand-in for PyTorch".to_string()
        } else {
            engine.to_string()
        }
    ));
    t.push_str("\n[evaluation]\ntrials = 3\n");
    t.push_str(&emit::comment(
        "KernelBench compares outputs with atol = rtol = 1e-4 in fp32 and 1e-2 in fp16 and bf16, which are \
         ksearch's default tolerances too.",
    ));
    t.push_str(&crate::inputs_toml(chosen));
    t.push_str("\n[checks]\n");
    t.push_str(&emit::comment(
        "What a ModelNew must not do (docs/importers.md). The problem's own torch operations stay allowed, since the \
         seed is the problem itself.",
    ));
    t.push_str("forbidden = [\n");
    for r in &rules.rules {
        t.push_str(&format!(
            "  {{ pattern = {}, reason = {} }},\n",
            emit::toml_str(&r.pattern),
            emit::toml_str(&r.reason)
        ));
    }
    t.push_str("]\n");
    t.push_str("\n[kernel]\nlanguage = \"python\"\nentry = \"ModelNew\"\ncalling = \"returns\"\nseed = \"seed.py\"\n");
    t.push_str(&emit::comment(&format!(
        "ModelNew(*args) is built once under torch.manual_seed({INIT_SEED}), like the reference's Model."
    )));
    t.push_str(&format!("init = {{ args = {init}, seed = {INIT_SEED} }}\n"));
    t.push_str(
        "\n[[baselines]]\nname = \"pytorch\"\nfile = \"baselines/pytorch.py\"\nentry = \"Model\"\n\
         description = \"the problem's Model in PyTorch eager mode\"\n",
    );
    t
}
