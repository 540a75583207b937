//! `task.toml`: what ksearch adds beside a FlashInfer-Bench definition (tolerances, trials,
//! input distributions, static checks, roofline formulas, the kernel convention).

use crate::definition::Definition;
use crate::dtype::{DType, Tolerance};
use crate::error::{parse_toml, Problems, SpecError};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskConfig {
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub evaluation: EvaluationConfig,
    /// Per-dtype overrides of the default tolerances, keyed by dtype name.
    #[serde(default)]
    pub tolerance: IndexMap<String, Tolerance>,
    #[serde(default)]
    pub inputs: IndexMap<String, Distribution>,
    #[serde(default)]
    pub checks: ChecksConfig,
    #[serde(default)]
    pub roofline: Option<RooflineConfig>,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationConfig {
    pub trials: u32,
    pub matched_ratio: f64,
    pub distributions: Vec<String>,
    pub timeout_s: f64,
    pub warmup: u32,
    pub iterations: u32,
    pub min_iterations: u32,
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

/// A fixed distribution for one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    Normal {
        #[serde(default)]
        mean: f64,
        #[serde(default = "one")]
        std: f64,
    },
    Uniform {
        low: f64,
        high: f64,
    },
    HeavyTailed {
        #[serde(default = "three")]
        df: f64,
        #[serde(default = "one")]
        scale: f64,
    },
    Randint {
        low: Bound,
        high: Bound,
    },
    /// Segment offsets (CSR row pointers such as FlashInfer's `kv_indptr`): a 1-D array that
    /// starts at 0, never decreases and ends at `total`; the segment lengths are random and
    /// may be 0.
    Offsets {
        total: Bound,
    },
    /// Distinct integers in `[low, high)` in random order (page or row indices such as
    /// `kv_indices`); the input must not have more elements than the range holds.
    Unique {
        #[serde(default = "zero_bound")]
        low: Bound,
        high: Bound,
    },
}

impl Distribution {
    /// The name used in task.toml and in the harness request.
    pub fn name(&self) -> &'static str {
        match self {
            Distribution::Normal { .. } => "normal",
            Distribution::Uniform { .. } => "uniform",
            Distribution::HeavyTailed { .. } => "heavy_tailed",
            Distribution::Randint { .. } => "randint",
            Distribution::Offsets { .. } => "offsets",
            Distribution::Unique { .. } => "unique",
        }
    }

    /// Checks this distribution for input `name` of the definition; `field` locates it in
    /// messages (`inputs.x`, `line 3: inputs.x`).
    pub(crate) fn check(&self, name: &str, def: &Definition, field: &str, push: &mut dyn FnMut(String, String)) {
        let Some(spec) = def.inputs.get(name) else {
            push(field.to_string(), format!("the definition has no input '{name}'"));
            return;
        };
        let need_integer = |what: &str, push: &mut dyn FnMut(String, String)| {
            if !spec.dtype.is_integer() {
                push(
                    field.to_string(),
                    format!("{what} needs an integer input, '{name}' is {}", spec.dtype),
                );
            }
        };
        let bounds = |bounds: &[&Bound], push: &mut dyn FnMut(String, String)| {
            for bound in bounds {
                if let Err(msg) = bound.check(def) {
                    push(field.to_string(), msg);
                }
            }
        };
        match self {
            Distribution::Normal { std, .. } if !positive(*std) => push(field.into(), "std must be positive".into()),
            Distribution::Uniform { low, high } if !(positive(high - low)) => {
                push(field.into(), format!("needs low < high, got {low} and {high}"))
            }
            Distribution::HeavyTailed { df, scale } if !(positive(*df) && positive(*scale)) => {
                push(field.into(), "df and scale must be positive".into())
            }
            Distribution::Randint { low, high } | Distribution::Unique { low, high } => {
                need_integer(self.name(), push);
                bounds(&[low, high], push);
                if let (Bound::Value(l), Bound::Value(h)) = (low, high) {
                    if l >= h {
                        push(field.into(), format!("needs low < high, got {l} and {h}"));
                    }
                }
            }
            Distribution::Offsets { total } => {
                need_integer("offsets", push);
                if spec.dims().len() != 1 {
                    push(
                        field.into(),
                        format!(
                            "offsets needs a 1-D input, '{name}' has {} dimensions",
                            spec.dims().len()
                        ),
                    );
                }
                bounds(&[total], push);
                if let Bound::Value(t) = total {
                    if *t < 0 {
                        push(field.into(), format!("total must not be negative, got {t}"));
                    }
                }
            }
            _ => {}
        }
    }
}

/// An integer bound: a number, the name of an axis, or an integer expression over the axes
/// (`+ - * / %` and parentheses, e.g. `"num_pages * page_size"`; `/` must divide exactly).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Bound {
    Value(i64),
    Axis(String),
}

impl Bound {
    pub(crate) fn check(&self, def: &Definition) -> Result<(), String> {
        let Bound::Axis(text) = self else { return Ok(()) };
        if crate::definition::is_c_identifier(text) {
            return if def.axes.contains_key(text) {
                Ok(())
            } else {
                Err(format!("bound names undeclared axis '{text}'"))
            };
        }
        let tree =
            evalexpr::build_operator_tree(text).map_err(|e| format!("bound '{text}' is not an expression: {e}"))?;
        if let Some(f) = tree.iter_function_identifiers().next() {
            return Err(format!(
                "bound '{text}' calls '{f}'; bounds allow numbers, axis names, + - * / % and parentheses"
            ));
        }
        for axis in tree.iter_variable_identifiers() {
            if !def.axes.contains_key(axis) {
                return Err(format!("bound '{text}' uses undeclared axis '{axis}'"));
            }
        }
        Ok(())
    }

    /// Its value for one workload's axes (`None` when an expression does not evaluate to an
    /// integer there).
    pub fn value(&self, axes: &IndexMap<String, i64>) -> Option<i64> {
        match self {
            Bound::Value(v) => Some(*v),
            Bound::Axis(text) => {
                if let Some(v) = axes.get(text) {
                    return Some(*v);
                }
                let mut ctx = evalexpr::HashMapContext::new();
                for (name, value) in axes {
                    evalexpr::ContextWithMutableVariables::set_value(
                        &mut ctx,
                        name.clone(),
                        evalexpr::Value::Int(*value),
                    )
                    .ok()?;
                }
                match evalexpr::eval_with_context(text, &ctx).ok()? {
                    evalexpr::Value::Int(v) => Some(v),
                    evalexpr::Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(f as i64),
                    _ => None,
                }
            }
        }
    }
}

fn zero_bound() -> Bound {
    Bound::Value(0)
}

/// True for numbers above zero; false for NaN.
fn positive(x: f64) -> bool {
    x > 0.0
}

fn one() -> f64 {
    1.0
}
fn three() -> f64 {
    3.0
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksConfig {
    #[serde(default)]
    pub forbidden: Vec<ForbiddenPattern>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForbiddenPattern {
    /// A regular expression matched against the candidate's source, comments removed.
    pub pattern: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RooflineConfig {
    /// Bytes a kernel must move at least, as an expression over the axes.
    pub bytes: Option<String>,
    /// Floating-point operations, as an expression over the axes.
    pub flops: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelConfig {
    pub language: String,
    /// The symbol a bare source file must define.
    pub entry: Option<String>,
    pub openmp: bool,
    /// The naive starting kernel, relative to the task folder.
    pub seed: Option<String>,
    /// A kernel template for the knob tuner (docs/templates.md), relative to the task folder.
    pub template: Option<String>,
    /// Its knob file.
    pub knobs: Option<String>,
    /// How the harness calls a Python-module candidate (backends `triton` and `python`).
    pub calling: Calling,
    /// Construction of a class entry point (KernelBench's `ModelNew`): its arguments and the
    /// torch seed set just before, so candidate and reference get the same parameters.
    pub init: Option<ModuleInit>,
}

/// How a Python-module entry point is called (docs/protocol.md). The `c` and `cuda` backends
/// always use destination-passing style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calling {
    /// `entry(*inputs, *outputs, *var_axes)`, writing the outputs in place.
    #[default]
    Dps,
    /// `entry(*inputs)` returning the output, or a tuple of outputs in definition order.
    Returns,
    /// `entry(tuple_of_inputs)` returning as `Returns` does (GPU MODE's `custom_kernel(data)`).
    Tuple,
}

impl Calling {
    pub fn name(self) -> &'static str {
        match self {
            Calling::Dps => "dps",
            Calling::Returns => "returns",
            Calling::Tuple => "tuple",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleInit {
    #[serde(default)]
    pub args: Vec<serde_json::Value>,
    #[serde(default)]
    pub seed: u64,
}

/// One `[[baselines]]` entry of task.toml.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// How reports and `ksearch eval --baseline NAME` refer to it.
    pub name: String,
    /// Its source, relative to the task folder.
    pub file: String,
    /// The symbol (function or class) to call.
    pub entry: String,
    /// Defaults to the language the file's extension implies.
    #[serde(default)]
    pub language: Option<String>,
    /// Defaults to the task's `[kernel].calling`.
    #[serde(default)]
    pub calling: Option<Calling>,
    #[serde(default)]
    pub description: Option<String>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        KernelConfig {
            language: "c".into(),
            entry: None,
            openmp: false,
            seed: None,
            template: None,
            knobs: None,
            calling: Calling::Dps,
            init: None,
        }
    }
}

/// Languages a solution may be written in; backends for some arrive later.
pub const LANGUAGES: [&str; 5] = ["c", "cuda", "triton", "python", "mlx"];

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
            p.push("evaluation.max_timing_s", "must be positive");
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
        if !LANGUAGES.contains(&self.kernel.language.as_str()) {
            p.push(
                "kernel.language",
                format!(
                    "unknown language '{}'; expected one of {}",
                    self.kernel.language,
                    LANGUAGES.join(", ")
                ),
            );
        }
        if let Some(entry) = &self.kernel.entry {
            if !crate::definition::is_c_identifier(entry) {
                p.push("kernel.entry", format!("'{entry}' is not a valid symbol name"));
            }
        }
        if self.kernel.calling != Calling::Dps && !matches!(self.kernel.language.as_str(), "python" | "triton") {
            p.push(
                "kernel.calling",
                format!(
                    "'{}' applies to Python-module candidates (language python or triton); \
                     the {} backend always uses destination-passing style",
                    self.kernel.calling.name(),
                    self.kernel.language
                ),
            );
        }
        for (i, b) in self.baselines.iter().enumerate() {
            let field = |f: &str| format!("baselines[{i}].{f}");
            if !crate::definition::is_c_identifier(&b.name) {
                p.push(field("name"), format!("'{}' must be an identifier", b.name));
            }
            if self.baselines[..i].iter().any(|o| o.name == b.name) {
                p.push(field("name"), format!("'{}' appears twice", b.name));
            }
            if !crate::definition::is_c_identifier(&b.entry) {
                p.push(field("entry"), format!("'{}' is not a valid symbol name", b.entry));
            }
            if let Err(why) = crate::solution::check_source_path(&b.file) {
                p.push(field("file"), format!("'{}' {why}", b.file));
            }
            match (&b.language, crate::solution::language_of(&b.file)) {
                (Some(l), _) if !LANGUAGES.contains(&l.as_str()) => p.push(
                    field("language"),
                    format!("unknown language '{l}'; expected one of {}", LANGUAGES.join(", ")),
                ),
                (None, None) => p.push(
                    field("language"),
                    format!(
                        "is not set and '{}' has no extension that names one (.c, .cu, .py)",
                        b.file
                    ),
                ),
                _ => {}
            }
        }
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

    fn def() -> Definition {
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
    fn input_overrides_are_checked() {
        let text = "[inputs.x]\ndistribution = \"randint\"\nlow = 0\nhigh = \"K\"\n[inputs.idx]\ndistribution = \"randint\"\nlow = 0\nhigh = \"M\"\n";
        let e = TaskConfig::parse("task.toml", text, &def()).unwrap_err();
        let msgs: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "task.toml: inputs.x: randint needs an integer input, 'x' is float32",
                "task.toml: inputs.x: bound names undeclared axis 'K'",
            ]
        );
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

    #[test]
    fn structured_integer_distributions_are_checked() {
        let text = "[inputs.idx]\ndistribution = \"unique\"\nhigh = \"M * N\"\n";
        let cfg = TaskConfig::parse("task.toml", text, &def()).unwrap();
        assert_eq!(
            cfg.inputs["idx"],
            Distribution::Unique {
                low: Bound::Value(0),
                high: Bound::Axis("M * N".into())
            }
        );
        let axes: IndexMap<String, i64> = [("M".to_string(), 4), ("N".to_string(), 3)].into_iter().collect();
        assert_eq!(Bound::Axis("M * N - 2".into()).value(&axes), Some(10));
        let text = "[inputs.idx]\ndistribution = \"offsets\"\ntotal = \"M + K\"\n\
                    [inputs.x]\ndistribution = \"unique\"\nlow = 0\nhigh = \"max(M, N)\"\n";
        let e = TaskConfig::parse("task.toml", text, &def()).unwrap_err();
        let msgs: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert_eq!(
            msgs,
            [
                "task.toml: inputs.idx: bound 'M + K' uses undeclared axis 'K'",
                "task.toml: inputs.x: unique needs an integer input, 'x' is float32",
                "task.toml: inputs.x: bound 'max(M, N)' calls 'max'; bounds allow numbers, axis names, + - * / % and parentheses",
            ]
        );
    }
}
