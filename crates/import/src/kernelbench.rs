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
    refuse_uncheckable(&found, &outputs).map_err(|message| ImportError::Uncheckable {
        file: shown.clone(),
        message,
    })?;
    let eval_dropout = !found.dropout.is_empty();
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
                let mut draw = draws::choose(name, dtype, &[v], &plan, "get_inputs()");
                // A computed input whose values the model may need in a range (a log of a
                // softmax's output): drawn from the range it had in the problem's own run.
                if let Some(seen) = found.input_ranges.get(i).copied().flatten() {
                    if let Some(observed) = draws::observed(name, dtype, v, &seen, "get_inputs()") {
                        draw = observed;
                    }
                }
                chosen.push((name.clone(), draw));
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
    let mut description = format!(
        "KernelBench problem {file_name}: the output of the PyTorch module Model (built with arguments {init_py} \
         under torch.manual_seed({INIT_SEED})) applied to the inputs in get_inputs() order. Candidates define a \
         class ModelNew with Model's constructor and forward signature; ksearch builds it the same way, so \
         parameters created in the same order get the same values."
    );
    if eval_dropout {
        description.push_str(&format!(
            " Dropout is off: {} and ModelNew's dropout modules are in eval mode, so dropout passes its input \
             through and the output is deterministic (the problem's training-mode dropout is random, and a random \
             output cannot be checked).",
            found.dropout.join(", ")
        ));
    }
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
        reference: reference_source(&file_name, &source, &inputs, &init_py, eval_dropout),
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
    let mut task_toml = task_toml(&file_name, &found.engine, &chosen, &rules, &init_toml, &found.dropout);
    task_toml.push_str(&tolerance_toml);

    let folder = Folder {
        definition,
        workloads,
        task_toml,
        files: vec![
            ("seed.py".into(), seed),
            ("baselines/pytorch.py".into(), source.clone()),
        ],
        blobs: Vec::new(),
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
    if eval_dropout {
        checks_list.push(format!(
            "dropout is off: the model's dropout modules ({}) are put in eval mode in the reference and in every \
             ModelNew (task.toml [kernel].init.eval_dropout), where they pass their input through. In training mode \
             (nn.Module's default, which KernelBench keeps) they zero a random share of their input on every call, so \
             no two calls agree and no kernel can be checked; candidates compute the model without dropout",
            found.dropout.join(", ")
        ));
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

/// Why the problem cannot be checked as it stands, from the probe's real run of it (PyTorch
/// only): its forward is random beyond dropout modules (which the import turns off), or an
/// output is zero (or not finite) everywhere on the problem's own inputs. Either way the task
/// would be refused by `ksearch eval`'s vet of the reference, or pass a kernel writing zeros;
/// saying so here names the problem's defect instead.
fn refuse_uncheckable(found: &KernelBenchProbe, outputs: &[String]) -> Result<(), String> {
    let inputs_were = format!(
        "on the problem's own inputs (get_inputs() under the seed of KernelBench's first correctness trial, \
         Model built under torch.manual_seed({INIT_SEED}))"
    );
    if found.random {
        let beyond = if found.dropout.is_empty() {
            String::new()
        } else {
            format!(
                " even with its dropout modules ({}) in eval mode",
                found.dropout.join(", ")
            )
        };
        return Err(format!(
            "Model.forward draws random numbers{beyond}: torch's random number generator advanced while it ran \
             {inputs_were}, so its output differs from call to call and no kernel can be checked against it \
             (KernelBench's own check calls Model and then ModelNew without reseeding in between, so it compares two \
             different draws too). This is a defect of the problem: make forward deterministic, e.g. by drawing the \
             random values in get_inputs() and passing them in"
        ));
    }
    for (i, name) in outputs.iter().enumerate() {
        if found.largest.get(i).copied().flatten() != Some(0.0) {
            continue;
        }
        let what = if found.nonfinite.get(i).copied().unwrap_or(false) {
            "has no finite non-zero value (only zeros, NaN or infinity)"
        } else {
            "is identically zero"
        };
        return Err(format!(
            "the problem's output '{name}' (Model.forward's output {i}) {what} {inputs_were}: no tolerance can tell \
             a correct kernel from one that writes zeros, and KernelBench's check would pass a kernel writing zeros. \
             This is a defect of the problem, not of the import: change its operations or constants so that the \
             output depends on the inputs"
        ));
    }
    Ok(())
}

/// The definition's reference: the problem file as is, then `run` building Model once.
fn reference_source(file_name: &str, source: &str, inputs: &[String], init_py: &str, eval_dropout: bool) -> String {
    let args = inputs.join(", ");
    // The harness does the same to ModelNew when task.toml's [kernel].init.eval_dropout is set.
    let dropout_off = if eval_dropout {
        "        # Dropout off (task.toml [kernel].init.eval_dropout): eval mode passes the input through.\n        \
         for _ksearch_m in _ksearch_model.modules():\n            \
         if isinstance(_ksearch_m, _ksearch_torch.nn.modules.dropout._DropoutNd):\n                \
         _ksearch_m.eval()\n"
    } else {
        ""
    };
    format!(
        "{header}\n{source}\n\n# --- added by ksearch import ---\nimport torch as _ksearch_torch\n\n_ksearch_model = None\n_ksearch_on = None\n\n\n\
         def run({args}):\n    global _ksearch_model, _ksearch_on\n    if _ksearch_model is None:\n        \
         _ksearch_torch.manual_seed({INIT_SEED})\n        _ksearch_model = Model(*{init_py})\n{dropout_off}    \
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

fn task_toml(
    file_name: &str,
    engine: &str,
    chosen: &[(String, Draw)],
    rules: &checks::RuleSet,
    init: &str,
    dropout: &[String],
) -> String {
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
    if dropout.is_empty() {
        t.push_str(&format!("init = {{ args = {init}, seed = {INIT_SEED} }}\n"));
    } else {
        t.push_str(&emit::comment(&format!(
            "eval_dropout: the dropout modules ({}) are put in eval mode, in ModelNew as in the reference, so they \
             pass their input through. The problem leaves them in training mode, where each call zeroes a different \
             random share of the input: its output is random and cannot be checked. Candidates compute the model \
             without dropout.",
            dropout.join(", ")
        )));
        t.push_str(&format!(
            "init = {{ args = {init}, seed = {INIT_SEED}, eval_dropout = true }}\n"
        ));
    }
    t.push_str(
        "\n[[baselines]]\nname = \"pytorch\"\nfile = \"baselines/pytorch.py\"\nentry = \"Model\"\n\
         description = \"the problem's Model in PyTorch eager mode\"\n",
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(extra: serde_json::Value) -> KernelBenchProbe {
        let mut base = serde_json::json!({
            "engine": "torch", "inputs": [], "input_names": null, "init": [], "outputs": [],
            "int_globals": {},
        });
        if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn uncheckable_problems_are_refused_with_their_defect_and_others_pass() {
        let outputs = ["output0".to_string(), "output1".to_string()];
        // Measured and non-zero, or not measured at all (the stand-in, outputs too large for
        // the CPU): nothing to refuse.
        assert!(refuse_uncheckable(&probe(serde_json::json!({"largest": [2.0, 1e-9]})), &outputs).is_ok());
        assert!(refuse_uncheckable(&probe(serde_json::json!({})), &outputs).is_ok());
        assert!(refuse_uncheckable(&probe(serde_json::json!({"largest": [null, null]})), &outputs).is_ok());
        // One output zero is enough: the harness vets each output.
        let zero = refuse_uncheckable(&probe(serde_json::json!({"largest": [2.0, 0.0]})), &outputs).unwrap_err();
        assert!(
            zero.starts_with("the problem's output 'output1' (Model.forward's output 1) is identically zero")
                && zero.contains("KernelBench's check would pass a kernel writing zeros"),
            "{zero}"
        );
        let nan = refuse_uncheckable(
            &probe(serde_json::json!({"largest": [0.0, 1.0], "nonfinite": [true, false]})),
            &outputs,
        )
        .unwrap_err();
        assert!(
            nan.contains("'output0'") && nan.contains("no finite non-zero value"),
            "{nan}"
        );
        // Randomness left after dropout was turned off names the dropout that was.
        let random = refuse_uncheckable(
            &probe(serde_json::json!({"largest": [1.0, 1.0], "random": true, "dropout": ["drop"]})),
            &outputs,
        )
        .unwrap_err();
        assert!(
            random.starts_with("Model.forward draws random numbers even with its dropout modules (drop) in eval mode"),
            "{random}"
        );
    }
}
