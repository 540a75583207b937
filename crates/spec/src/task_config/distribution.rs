//! Per-input distributions (`[inputs.NAME]`) and the integer bounds they take.

use crate::definition::Definition;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::positive;

/// A fixed distribution for one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "distribution", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    /// Gaussian values.
    Normal {
        /// The mean; 0 by default.
        #[serde(default)]
        mean: f64,
        /// The standard deviation; positive, 1 by default.
        #[serde(default = "one")]
        std: f64,
    },
    /// Values uniform in `[low, high)`.
    Uniform {
        /// The lower end; below `high`.
        low: f64,
        /// The upper end.
        high: f64,
    },
    /// Student's t values times `scale`: occasional large magnitudes that expose overflow and
    /// poor accumulation.
    HeavyTailed {
        /// Degrees of freedom; positive, 3 by default (smaller is heavier-tailed).
        #[serde(default = "three")]
        df: f64,
        /// The factor applied to each draw; positive, 1 by default.
        #[serde(default = "one")]
        scale: f64,
    },
    /// Integers uniform in `[low, high)`, for integer inputs only.
    Randint {
        /// The smallest value drawn.
        low: Bound,
        /// One past the largest value drawn.
        high: Bound,
    },
    /// Segment offsets (CSR row pointers such as FlashInfer's `kv_indptr`): a 1-D array that
    /// starts at 0, never decreases and ends at `total`; the segment lengths are random and
    /// may be 0.
    Offsets {
        /// The last offset, the sum of the segment lengths; not negative.
        total: Bound,
    },
    /// Distinct integers in `[low, high)` in random order (page or row indices such as
    /// `kv_indices`); the input must not have more elements than the range holds.
    Unique {
        /// The smallest value that may be drawn; 0 by default.
        #[serde(default = "zero_bound")]
        low: Bound,
        /// One past the largest value that may be drawn.
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
    /// A literal integer.
    Value(i64),
    /// An axis name or an expression over axes, evaluated per workload. At load time a name
    /// must be a declared axis, and an expression must parse, call no function and use only
    /// declared axes.
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
    /// integer there). Evaluated in floating point, as the harness does (inputs.py
    /// `_evaluate`): `/` divides exactly, so `7 / 2` is 3.5 and no bound, where integer
    /// arithmetic would truncate it to 3.
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
                        evalexpr::Value::Float(*value as f64),
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

fn one() -> f64 {
    1.0
}
fn three() -> f64 {
    3.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task_config::tests::def;
    use crate::task_config::TaskConfig;

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
        // `/` divides exactly (the harness refuses the bound there), not truncating.
        let odd: IndexMap<String, i64> = [("n".to_string(), 7)].into_iter().collect();
        assert_eq!(Bound::Axis("n / 2".into()).value(&odd), None);
        let even: IndexMap<String, i64> = [("n".to_string(), 8)].into_iter().collect();
        assert_eq!(Bound::Axis("n / 2".into()).value(&even), Some(4));
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
