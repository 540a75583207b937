//! `task.toml`: what ksearch adds beside a FlashInfer-Bench definition (tolerances, trials,
//! input distributions, static checks, roofline formulas, the kernel convention).
//!
//! Submodules: `distribution` (per-input distributions and their bounds), `kernel` (the kernel
//! convention and the native baselines).

mod distribution;
mod kernel;

pub use distribution::{Bound, Distribution};
pub use kernel::{BaselineConfig, Calling, KernelConfig, ModuleInit};

use crate::definition::Definition;
use crate::dtype::{DType, Tolerance};
use crate::error::{parse_toml, Problems, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// A parsed `task.toml` (docs/task-format.md). Every table is optional: an absent file is the
/// [`Default`], so a bare FlashInfer-Bench folder is a task.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    /// Device names or aliases of the knowledge base the task is meant for, in order of
    /// preference; the first that runs the task's kernel dialect on this machine is the target
    /// (docs/knowledge-base.md).
    #[serde(default)]
    pub targets: Vec<String>,
    /// How candidates are checked and timed (`[evaluation]`).
    #[serde(default)]
    pub evaluation: EvaluationConfig,
    /// Per-dtype overrides of the default tolerances, keyed by dtype name.
    #[serde(default)]
    pub tolerance: IndexMap<String, Tolerance>,
    /// Fixed distributions of single inputs (`[inputs.NAME]`), keyed by input name; they take
    /// precedence over a workload's own and over synthesised ones.
    #[serde(default)]
    pub inputs: IndexMap<String, Distribution>,
    /// Task-specific static checks on candidate source (`[checks]`).
    #[serde(default)]
    pub checks: ChecksConfig,
    /// Roofline formulas (`[roofline]`), when the task gives them.
    #[serde(default)]
    pub roofline: Option<RooflineConfig>,
    /// The kernel convention (`[kernel]`).
    #[serde(default)]
    pub kernel: KernelConfig,
    /// Native implementations a result must be compared with (`[[baselines]]`): trusted code
    /// named by the task author, evaluated like candidates but exempt from the static checks.
    #[serde(default)]
    pub baselines: Vec<BaselineConfig>,
    /// Existing implementations of the same computation to adapt (`[[expertise]]`), shown to
    /// the planner and coder at the `full` context level.
    #[serde(default)]
    pub expertise: Vec<crate::expertise::ExpertiseConfig>,
}

/// task.toml's `[evaluation]`: correctness trials and timing. Every field is optional; the
/// defaults are those of [`Default`] (docs/task-format.md shows them).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationConfig {
    /// Correctness trials per workload, each with fresh inputs; at least 1.
    pub trials: u32,
    /// Share of output elements that must be within tolerance, in (0, 1].
    pub matched_ratio: f64,
    /// Distributions of float inputs, cycled over the trials; each one of [`DISTRIBUTIONS`],
    /// at least one.
    pub distributions: Vec<String>,
    /// Seconds the whole evaluation may take, compile included; in (0, [`MAX_TIMEOUT_S`]].
    pub timeout_s: f64,
    /// Untimed calls of reference and candidate before timing a workload.
    pub warmup: u32,
    /// Timed (reference, candidate) pairs per workload, at most.
    pub iterations: u32,
    /// Timed pairs per workload at least, even past `max_timing_s`; in 1..=`iterations`.
    pub min_iterations: u32,
    /// Seconds after which timing a workload stops once `min_iterations` ran; in
    /// (0, [`MAX_TIMEOUT_S`]].
    pub max_timing_s: f64,
}

impl Default for EvaluationConfig {
    fn default() -> Self {
        EvaluationConfig {
            trials: 3,
            matched_ratio: 1.0,
            distributions: DISTRIBUTIONS.iter().map(|s| s.to_string()).collect(),
            timeout_s: 60.0,
            warmup: 3,
            iterations: 30,
            min_iterations: 5,
            max_timing_s: 0.5,
        }
    }
}

/// The longest evaluation a task may ask for (a day): longer is a typo, not a kernel.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Trial-level distributions for float inputs, cycled over the trials.
pub const DISTRIBUTIONS: [&str; 3] = ["normal", "uniform", "heavy_tailed"];

/// True for numbers above zero; false for NaN.
fn positive(x: f64) -> bool {
    x > 0.0
}

/// task.toml's `[checks]`: static checks on candidate source added by the task, on top of the
/// ones every task gets.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksConfig {
    /// Patterns a candidate's source must not contain; each a valid regular expression.
    #[serde(default)]
    pub forbidden: Vec<ForbiddenPattern>,
}

/// One forbidden pattern of `[checks]`: a candidate whose source matches it is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForbiddenPattern {
    /// A regular expression matched against the candidate's source, comments removed.
    pub pattern: String,
    /// Why it is forbidden, shown to whoever wrote the candidate.
    pub reason: String,
}

/// task.toml's `[roofline]`: the work a kernel must do, for achieved GB/s and GFLOP/s and to flag
/// speedups faster than the device allows. Formulas are checked at load time with every axis at
/// 1 ([`eval_formula`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RooflineConfig {
    /// Bytes a kernel must move at least, as an expression over the axes.
    pub bytes: Option<String>,
    /// Floating-point operations, as an expression over the axes.
    pub flops: Option<String>,
}

impl TaskConfig {
    /// Parses and validates `task.toml` against the definition it sits beside.
    pub fn parse(file: &str, text: &str, def: &Definition) -> Result<TaskConfig, SpecError> {
        let cfg: TaskConfig = parse_toml(file, text)?;
        cfg.validate(file, def)?;
        Ok(cfg)
    }

    /// The tolerance used for `dtype`: the task's override, else the default.
    pub fn tolerance_for(&self, dtype: DType) -> Option<Tolerance> {
        self.tolerance
            .get(dtype.name())
            .copied()
            .or_else(|| dtype.default_tolerance())
    }

    /// Checks the configuration against `def` (tolerances for every output dtype, input
    /// distributions, regular expressions, formulas, the kernel convention, baselines,
    /// expertise), reporting every problem at once; `file` names it in errors.
    pub fn validate(&self, file: &str, def: &Definition) -> Result<(), SpecError> {
        let mut p = Problems::new(file);
        let e = &self.evaluation;
        if e.trials == 0 {
            p.push("evaluation.trials", "must be at least 1");
        }
        if !(positive(e.matched_ratio) && e.matched_ratio <= 1.0) {
            p.push(
                "evaluation.matched_ratio",
                format!("must be in (0, 1], got {}", e.matched_ratio),
            );
        }
        if e.distributions.is_empty() {
            p.push("evaluation.distributions", "must name at least one distribution");
        }
        for d in &e.distributions {
            if !DISTRIBUTIONS.contains(&d.as_str()) {
                p.push(
                    "evaluation.distributions",
                    format!(
                        "unknown distribution '{d}'; expected one of {}",
                        DISTRIBUTIONS.join(", ")
                    ),
                );
            }
        }
        if !positive(e.timeout_s) || e.timeout_s > MAX_TIMEOUT_S {
            p.push(
                "evaluation.timeout_s",
                format!("must be between 0 and {MAX_TIMEOUT_S} seconds, got {}", e.timeout_s),
            );
        }
        if e.iterations == 0 || e.min_iterations == 0 || e.min_iterations > e.iterations {
            p.push(
                "evaluation.min_iterations",
                format!(
                    "need 1 <= min_iterations ({}) <= iterations ({})",
                    e.min_iterations, e.iterations
                ),
            );
        }
        if !positive(e.max_timing_s) || e.max_timing_s > MAX_TIMEOUT_S {
            p.push(
                "evaluation.max_timing_s",
                format!("must be positive and at most {MAX_TIMEOUT_S} s"),
            );
        }
        for (name, tol) in &self.tolerance {
            if let Err(msg) = name.parse::<DType>() {
                p.push(format!("tolerance.{name}"), msg);
            }
            if !(tol.atol >= 0.0 && tol.rtol >= 0.0) || tol.atol.is_nan() || tol.rtol.is_nan() {
                p.push(
                    format!("tolerance.{name}"),
                    "atol and rtol must be non-negative numbers",
                );
            }
        }
        for dtype in def.dtypes() {
            if def.outputs.values().any(|o| o.dtype == dtype) && self.tolerance_for(dtype).is_none() {
                p.push(
                    format!("tolerance.{dtype}"),
                    format!("outputs of dtype {dtype} have no default tolerance; the task must set one"),
                );
            }
        }
        for (name, dist) in &self.inputs {
            dist.check(name, def, &format!("inputs.{name}"), &mut |field, message| {
                p.push(field, message)
            });
        }
        for (i, f) in self.checks.forbidden.iter().enumerate() {
            if let Err(err) = regex::Regex::new(&f.pattern) {
                p.push(
                    format!("checks.forbidden[{i}].pattern"),
                    format!("not a valid regular expression: {err}"),
                );
            }
        }
        if let Some(roof) = &self.roofline {
            let ones: IndexMap<String, i64> = def.axes.keys().map(|k| (k.clone(), 1)).collect();
            for (field, expr) in [("roofline.bytes", &roof.bytes), ("roofline.flops", &roof.flops)] {
                if let Some(expr) = expr {
                    if let Err(msg) = eval_formula(expr, &ones) {
                        p.push(field, msg);
                    }
                }
            }
        }
        self.kernel.check(&mut p);
        kernel::check_baselines(&self.baselines, &mut p);
        kernel::check_writable_inputs(&self.kernel.writable_inputs, def, &mut p);
        crate::expertise::validate(&self.expertise, &mut p);
        p.into_result()
    }
}

/// Evaluates a roofline formula (`+ - * / ( )`, numbers, axis names) with the given axes.
pub fn eval_formula(expr: &str, axes: &IndexMap<String, i64>) -> Result<f64, String> {
    let mut ctx = evalexpr::HashMapContext::new();
    for (name, value) in axes {
        // Floats, so that `/` never truncates.
        evalexpr::ContextWithMutableVariables::set_value(&mut ctx, name.clone(), evalexpr::Value::Float(*value as f64))
            .map_err(|e| e.to_string())?;
    }
    let value = evalexpr::eval_number_with_context(expr, &ctx).map_err(|e| format!("cannot evaluate '{expr}': {e}"))?;
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("'{expr}' evaluates to {value}, expected a non-negative number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A definition with float and integer inputs, shared by the submodules' tests.
    pub(super) fn def() -> Definition {
        Definition::parse(
            "d.json",
            r#"{"name": "t", "op_type": "x", "axes": {"M": {"type": "var"}, "N": {"type": "var"}},
                "inputs": {"x": {"shape": ["M", "N"], "dtype": "float32"}, "idx": {"shape": ["M"], "dtype": "int32"}},
                "outputs": {"y": {"shape": ["M", "N"], "dtype": "float16"}},
                "reference": "def run(x, idx):\n    return x\n"}"#,
        )
        .unwrap()
    }

    #[test]
    fn defaults_and_overrides() {
        let cfg = TaskConfig::parse("task.toml", "[tolerance.float16]\natol = 0.05\nrtol = 0.0\n", &def()).unwrap();
        assert_eq!(cfg.evaluation.trials, 3);
        assert_eq!(
            cfg.tolerance_for(DType::Float16),
            Some(Tolerance { atol: 0.05, rtol: 0.0 })
        );
        assert_eq!(
            cfg.tolerance_for(DType::Float32),
            Some(Tolerance { atol: 1e-4, rtol: 1e-4 })
        );
    }

    #[test]
    fn python_path_must_stay_inside_the_task_folder() {
        let cfg = TaskConfig::parse(
            "task.toml",
            "[kernel]\nlanguage = \"python\"\npython_path = [\"modules\"]\n",
            &def(),
        )
        .unwrap();
        assert_eq!(cfg.kernel.python_path, vec!["modules".to_string()]);
        for bad in ["../elsewhere", "/abs", ""] {
            let text = format!("[kernel]\nlanguage = \"python\"\npython_path = [\"modules\", \"{bad}\"]\n");
            let e = TaskConfig::parse("task.toml", &text, &def()).unwrap_err().to_string();
            assert!(
                e.contains("kernel.python_path[1]") && e.contains("must be a folder inside the task folder"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let e = TaskConfig::parse("task.toml", "[evaluation]\ntrails = 3\n", &def())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("task.toml: evaluation.trails: unknown field `trails`"),
            "{e}"
        );
    }

    #[test]
    fn formulas() {
        let axes: IndexMap<String, i64> = [("M".to_string(), 4), ("N".to_string(), 3)].into_iter().collect();
        assert_eq!(eval_formula("4 * (2 * M * N) / 3", &axes), Ok(32.0));
        assert!(eval_formula("M * Q", &axes).unwrap_err().contains("cannot evaluate"));
        let e = TaskConfig::parse("task.toml", "[roofline]\nbytes = \"M * Q\"\n", &def())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("task.toml: roofline.bytes: cannot evaluate 'M * Q'"),
            "{e}"
        );
    }
}
