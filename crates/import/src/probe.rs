//! Runs `python/probe.py` on a problem: the shapes, dtypes and origins of its inputs and outputs.

use crate::error::ImportError;
use crate::Options;
use serde::Deserialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROBE: &str = include_str!("../python/probe.py");
/// The probe's other modules (GPU MODE folders and their --entry layout, the measurement of outputs) and the stand-in for
/// PyTorch, in four modules (dtypes, tensors, functions, nn and the install), written beside
/// probe.py.
const STANDIN: [(&str, &str); 7] = [
    ("probe_gpumode.py", include_str!("../python/probe_gpumode.py")),
    (
        "probe_gpumode_entry.py",
        include_str!("../python/probe_gpumode_entry.py"),
    ),
    ("probe_measure.py", include_str!("../python/probe_measure.py")),
    ("standin_dtypes.py", include_str!("../python/standin_dtypes.py")),
    ("standin_tensor.py", include_str!("../python/standin_tensor.py")),
    ("standin_ops.py", include_str!("../python/standin_ops.py")),
    ("standin_torch.py", include_str!("../python/standin_torch.py")),
];

/// One value a problem builds: a tensor or a Python number.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Value {
    Tensor {
        shape: Vec<i64>,
        dtype: String,
        /// Which factory made it and with what parameters (`{"fn": "randint", "low": 0, ...}`),
        /// when it came straight from one.
        origin: Option<serde_json::Map<String, serde_json::Value>>,
    },
    Scalar {
        dtype: String,
        value: serde_json::Value,
    },
}

#[derive(Debug, Deserialize)]
pub(crate) struct KernelBenchProbe {
    pub engine: String,
    pub inputs: Vec<Value>,
    pub input_names: Option<Vec<String>>,
    pub init: Vec<serde_json::Value>,
    pub outputs: Vec<Value>,
    /// The largest |value| of each output, from a real run of the model at import (PyTorch
    /// only); `None` where it was not measured.
    #[serde(default)]
    pub largest: Vec<Option<f64>>,
    /// Whether each output held NaN or infinity in that run.
    #[serde(default)]
    pub nonfinite: Vec<bool>,
    /// The values of each input in that run (floats only; `None` elsewhere, and empty when the
    /// model was not run).
    #[serde(default)]
    pub input_ranges: Vec<Option<Observed>>,
    /// Whether Model.forward advanced torch's random number generators in that run (with the
    /// modules of `dropout` in eval mode): its output differs from call to call.
    #[serde(default)]
    pub random: bool,
    /// The dropout modules with p > 0 of the model as built (training mode, nn.Module's
    /// default), by qualified name.
    #[serde(default)]
    pub dropout: Vec<String>,
    pub int_globals: indexmap::IndexMap<String, i64>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The values of one input as the problem made it, over its finite elements.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
pub(crate) struct Observed {
    pub min: f64,
    pub max: f64,
    /// Every row along the last dimension is non-negative and sums to 1 (a softmax's output).
    #[serde(default)]
    pub rows_sum_to_one: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeCall {
    pub inputs: Vec<Value>,
    /// For a generate_input that returns dicts, nested tuples or lists, or constants: the
    /// names of the flattened inputs, and the Python expression over them that rebuilds its
    /// value.
    #[serde(default)]
    pub leaf_names: Option<Vec<String>>,
    #[serde(default)]
    pub rebuild: Option<String>,
    /// generate_input returned one tensor, not a tuple.
    pub bare: bool,
    pub outputs: Vec<Value>,
    /// ref_kernel run for real at import on generate_input's own value (PyTorch only; the
    /// first call of each distinct size, within a size limit); `None` where it was not.
    #[serde(default)]
    pub measured: Option<GpuModeMeasured>,
}

/// The largest finite |value| of each output of one GPU MODE call run for real (0.0 when it has
/// none; `None` for non-float outputs), and the same on generate_input's value with its float
/// tensors redrawn from a normal distribution, measured only when some output was 0.0.
#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeMeasured {
    pub largest: Vec<Option<f64>>,
    #[serde(default)]
    pub redrawn: Option<Vec<Option<f64>>>,
    /// The inputs generate_input computes (no torch factory made them) written to a
    /// safetensors file of the probe's scratch folder, when the importer asked for them.
    #[serde(default)]
    pub saved: Option<GpuModeSaved>,
}

/// One call's computed inputs as the probe wrote them: keys `input_J` in `file`.
#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeSaved {
    /// The file's name in the scratch folder; `None` when nothing was written.
    pub file: Option<String>,
    /// The indices of the inputs written.
    pub inputs: Vec<usize>,
    /// Why some computed inputs were not written (dtype, size budget).
    #[serde(default)]
    pub skipped: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeTolerance {
    #[serde(default)]
    pub custom: bool,
    #[serde(default)]
    pub why: Option<String>,
    pub rtol: Option<f64>,
    pub atol: Option<f64>,
    #[serde(default)]
    pub literal: Vec<String>,
    #[serde(default)]
    pub defaults: Vec<String>,
    /// Where the tolerances come from when not from check_implementation (reference.py's
    /// module-level ATOL and RTOL).
    #[serde(default)]
    pub origin: Option<String>,
}

/// How `--entry FUNCTION` called a reference function of a GPU MODE problem laid out without
/// ref_kernel (the probe's probe_gpumode_entry.py).
#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeEntry {
    /// The reference function.
    pub function: String,
    /// generate_input or generate_inputs.
    pub generator: String,
    /// How the parameters were matched to the generator's values.
    pub how: String,
    /// The generator's arguments no test gives, as the folder's main harness file fixes them.
    #[serde(default)]
    pub fixed: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub fixed_from: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GpuModeProbe {
    pub engine: String,
    pub calls: Vec<GpuModeCall>,
    pub input_names: Option<Vec<String>>,
    pub tolerance: Option<GpuModeTolerance>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// reference.py without the top-level definitions ref_kernel does not reach (the seed's
    /// source), and the names left out; absent where the probe could not parse it.
    #[serde(default)]
    pub seed_source: Option<String>,
    #[serde(default)]
    pub seed_dropped: Vec<String>,
    /// Present when imported with `--entry`.
    #[serde(default)]
    pub entry: Option<GpuModeEntry>,
}

#[derive(Deserialize)]
struct ProbeError {
    kind: String,
    message: String,
    #[serde(default, rename = "where")]
    where_: Option<String>,
    #[serde(default)]
    trace: Option<String>,
    #[serde(default)]
    standin: bool,
}

/// Runs the probe with `request` (its `out` field is filled in here) and parses the answer.
pub(crate) fn run<T: serde::de::DeserializeOwned>(
    file: &Path,
    mut request: serde_json::Value,
    opts: &Options,
) -> Result<T, ImportError> {
    let file_name = file.display().to_string();
    let dir = tempfile::tempdir().map_err(|e| ImportError::io(Path::new("a temporary folder"), e))?;
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).map_err(|e| ImportError::io(&p, e))
    };
    write("probe.py", PROBE)?;
    for (name, text) in STANDIN {
        write(name, text)?;
    }
    let out = dir.path().join("answer.json");
    request["out"] = out.display().to_string().into();
    request["engine"] = if opts.stand_in { "standin" } else { "auto" }.into();
    let request_path = dir.path().join("request.json");
    write("request.json", &request.to_string())?;
    let log_path = dir.path().join("log.txt");
    let log = std::fs::File::create(&log_path).map_err(|e| ImportError::io(&log_path, e))?;
    let log_err = log.try_clone().map_err(|e| ImportError::io(&log_path, e))?;
    let python = opts.python();
    let python_name = python.display().to_string();
    // cwd is the problem's folder, as when its authors run it.
    let cwd = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut child = Command::new(&python)
        .arg(dir.path().join("probe.py"))
        .arg(&request_path)
        .current_dir(cwd)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| ImportError::Python {
            python: python_name.clone(),
            message: e.to_string(),
        })?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > opts.timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ImportError::Python {
                    python: python_name,
                    message: format!(
                        "running {file_name} took longer than {} s (a problem file that builds very large \
                         inputs on the CPU? pass --timeout to allow more)",
                        opts.timeout.as_secs()
                    ),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                return Err(ImportError::Python {
                    python: python_name,
                    message: e.to_string(),
                })
            }
        }
    };
    let log_text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let answer = match std::fs::read_to_string(&out) {
        Ok(text) => text,
        Err(_) => {
            return Err(ImportError::Python {
                python: python_name,
                message: format!("the probe exited with {status} without an answer:\n{}", tail(&log_text)),
            })
        }
    };
    let value: serde_json::Value = serde_json::from_str(&answer).map_err(|e| ImportError::Python {
        python: python_name.clone(),
        message: format!("the probe's answer is not JSON ({e})"),
    })?;
    if let Some(err) = value.get("error") {
        let err: ProbeError = serde_json::from_value(err.clone()).map_err(|e| ImportError::Python {
            python: python_name.clone(),
            message: format!("the probe's error is malformed ({e})"),
        })?;
        return Err(probe_error(&file_name, err));
    }
    serde_json::from_value(value).map_err(|e| ImportError::Python {
        python: python_name,
        message: format!("the probe's answer does not have the expected form ({e})"),
    })
}

fn probe_error(file: &str, err: ProbeError) -> ImportError {
    let where_ = err.where_.unwrap_or_else(|| "the file".into());
    match err.kind.as_str() {
        "problem" => ImportError::Problem {
            file: file.into(),
            message: err.message,
        },
        "unsupported" => ImportError::Unsupported {
            file: file.into(),
            message: err.message,
        },
        "standin" => ImportError::NeedsTorch {
            file: file.into(),
            where_,
            what: err.message,
        },
        "load" => ImportError::Problem {
            file: file.into(),
            message: format!(
                "cannot be loaded: {}\n{}",
                err.message,
                err.trace.unwrap_or_default().trim_end()
            ),
        },
        _ => ImportError::Raised {
            file: file.into(),
            where_,
            message: err.message,
            hint: if err.standin {
                " while run with ksearch's stand-in for PyTorch; if the file is right, install PyTorch to \
                 import it (with `--python PATH` naming an interpreter that has it)"
                    .into()
            } else {
                String::new()
            },
            trace: err.trace.unwrap_or_default().trim_end().to_string(),
        },
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
