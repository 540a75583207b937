//! How ksearch should draw each imported input, from how the problem made it: `torch.rand` is
//! uniform on [0, 1), `torch.randint(a, b, ...)` integers in [a, b), and so on. What cannot be
//! carried over (constant buffers, values computed from other tensors) becomes a note for the
//! user.

use crate::axes::AxisPlan;
use crate::probe::Value;
use ksearch_spec::{Bound, DType, Distribution};
use serde_json::{Map, Value as Json};

/// The task.toml distribution for one input (with a comment saying why), and a note for the
/// user when the original's values are not reproduced.
#[derive(Debug, Default)]
pub(crate) struct Draw {
    pub distribution: Option<(Distribution, String)>,
    pub note: Option<String>,
}

/// Whether an input is an output buffer: made with `torch.empty` in every workload (its
/// contents are garbage by construction, so the problem's kernel writes into it).
pub(crate) fn is_output_buffer(made: &[&Value]) -> bool {
    !made.is_empty()
        && made.iter().all(|v| match v {
            Value::Tensor { origin, .. } => origin.as_ref().and_then(|o| o.get("fn")?.as_str()) == Some("empty"),
            Value::Scalar { .. } => false,
        })
}

/// `made`: the input as the problem built it, in each workload; `maker` names the function that
/// built it (`get_inputs()`, `generate_input`).
pub(crate) fn choose(name: &str, dtype: DType, made: &[&Value], plan: &AxisPlan, maker: &str) -> Draw {
    let origins: Vec<Option<&Map<String, Json>>> = made
        .iter()
        .map(|v| match v {
            Value::Tensor { origin, .. } => origin.as_ref(),
            Value::Scalar { .. } => None,
        })
        .collect();
    if made.iter().any(|v| matches!(v, Value::Scalar { .. })) {
        return Draw::default();
    }
    let fns: Vec<Option<&str>> = origins.iter().map(|o| o.and_then(|o| o.get("fn")?.as_str())).collect();
    let Some(Some(first)) = fns.first().copied().map(|f| f.map(str::to_string)) else {
        return derived(name, dtype, maker);
    };
    if fns.iter().any(|f| *f != Some(first.as_str())) {
        return derived(name, dtype, maker);
    }
    let param =
        |key: &str| -> Vec<Option<f64>> { origins.iter().map(|o| o.and_then(|o| o.get(key)?.as_f64())).collect() };
    let same = |key: &str| -> Option<f64> {
        let values = param(key);
        let v = values.first().copied().flatten()?;
        values.iter().all(|x| *x == Some(v)).then_some(v)
    };
    let comment = |what: &str| format!("{maker} made '{name}' with {what}");
    match first.as_str() {
        "randn" if is_float(dtype) => Draw::default(),
        "rand" if is_float(dtype) => Draw {
            distribution: Some((
                Distribution::Uniform { low: 0.0, high: 1.0 },
                comment("torch.rand: uniform on [0, 1)"),
            )),
            note: None,
        },
        "uniform" if is_float(dtype) => match (same("low"), same("high")) {
            (Some(low), Some(high)) if low < high => Draw {
                distribution: Some((
                    Distribution::Uniform { low, high },
                    comment(&format!("uniform_({low}, {high})")),
                )),
                note: None,
            },
            _ => varying(name, maker, "uniform_"),
        },
        "normal" if is_float(dtype) => match (same("mean"), same("std")) {
            (Some(mean), Some(std)) if std > 0.0 => Draw {
                distribution: Some((
                    Distribution::Normal { mean, std },
                    comment(&format!("a normal distribution (mean {mean}, std {std})")),
                )),
                note: None,
            },
            _ => varying(name, maker, "normal_"),
        },
        "randint" | "random_" | "randperm" if dtype.is_integer() => {
            let bound = |key: &str| -> Option<Bound> {
                let values: Vec<i64> = param(key)
                    .into_iter()
                    .map(|v| v.map(|f| f as i64))
                    .collect::<Option<_>>()?;
                if values.iter().all(|v| *v == values[0]) {
                    return Some(Bound::Value(values[0]));
                }
                plan.axis_with_values(&values).map(|a| Bound::Axis(a.to_string()))
            };
            if first == "randperm" {
                return Draw {
                    distribution: None,
                    note: Some(format!(
                        "'{name}' is a permutation (torch.randperm) in {maker}; ksearch draws integers in [0, 100) \
                         unless task.toml [inputs.{name}] says otherwise (distribution = \"unique\" with \
                         high = its length gives a permutation)"
                    )),
                };
            }
            match (bound("low"), bound("high")) {
                (Some(low), Some(high)) => Draw {
                    distribution: Some((
                        Distribution::Randint {
                            low: low.clone(),
                            high: high.clone(),
                        },
                        comment(&format!("{first}({}, {})", show(&low), show(&high))),
                    )),
                    note: None,
                },
                _ => varying(name, maker, &first),
            }
        }
        "randint" | "random_" => Draw {
            distribution: None,
            note: Some(format!(
                "'{name}' ({dtype}) holds whole numbers in {maker} ({first}); ksearch draws real values from its \
                 trial distributions"
            )),
        },
        "empty" => Draw {
            distribution: None,
            note: Some(format!(
                "'{name}' is made with torch.empty in {maker}, an output buffer: task.toml lists it in \
                 [kernel].writable_inputs, so a candidate may write into it (as GPU MODE submissions do); it is \
                 passed with random contents, and what the candidate returns is what is checked"
            )),
        },
        "zeros" | "ones" | "full" | "tensor" | "arange" | "linspace" | "eye" => Draw {
            distribution: None,
            note: Some(format!(
                "'{name}' has fixed contents in {maker} (torch.{first}); ksearch draws random values for it"
            )),
        },
        other => Draw {
            distribution: None,
            note: Some(format!(
                "'{name}' is made with torch.{other} in {maker}; ksearch draws it from its own distributions"
            )),
        },
    }
}

fn show(b: &Bound) -> String {
    match b {
        Bound::Value(v) => v.to_string(),
        Bound::Axis(a) => a.clone(),
    }
}

fn varying(name: &str, maker: &str, what: &str) -> Draw {
    Draw {
        distribution: None,
        note: Some(format!(
            "'{name}' comes from {what} in {maker} with parameters that change between workloads and match no \
             axis; ksearch draws it from its own distributions (set task.toml [inputs.{name}] to fix one)"
        )),
    }
}

fn derived(name: &str, dtype: DType, maker: &str) -> Draw {
    let drawn = if dtype.is_integer() {
        "integers in [0, 100)"
    } else if is_float(dtype) {
        "values from its trial distributions (normal, uniform, heavy-tailed)"
    } else {
        "random values"
    };
    Draw {
        distribution: None,
        note: Some(format!(
            "'{name}' is computed in {maker} (not straight from one torch factory); ksearch draws {drawn}: if the \
             reference needs a range (positive values, valid indices), set task.toml [inputs.{name}]"
        )),
    }
}

pub(crate) fn is_float(d: DType) -> bool {
    !d.is_integer() && d != DType::Bool
}

/// ksearch's dtype for a torch dtype name (`float32`, `float8_e4m3fn`, ...).
pub(crate) fn dtype(torch_name: &str) -> Option<DType> {
    let name = match torch_name {
        "float" => "float32",
        "half" => "float16",
        "double" => "float64",
        "long" => "int64",
        "int" => "int32",
        "float8_e4m3fn" | "float8_e4m3fnuz" => "float8_e4m3",
        "float8_e5m2fnuz" => "float8_e5m2",
        "float4_e2m1fn_x2" => "float4_e2m1",
        other => other,
    };
    name.parse().ok()
}
