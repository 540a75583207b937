//! How ksearch should draw each imported input, from how the problem made it: `torch.rand` is
//! uniform on [0, 1), `torch.randint(a, b, ...)` integers in [a, b), and so on. What cannot be
//! carried over (constant buffers, values computed from other tensors) becomes a note for the
//! user.

use crate::axes::AxisPlan;
use crate::probe::{Observed, Value};
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

/// For a float input the problem computes (not straight from a torch factory) whose values were
/// all non-negative when the importer ran the problem: uniform on the range they took there.
/// ksearch's trial distributions would give it negative values, which such a model may not
/// accept (KernelBench's KLDivLoss takes the log of a softmax's output: NaN everywhere).
/// `None` for any other input, which keeps [`choose`]'s draw.
pub(crate) fn observed(name: &str, dtype: DType, made: &Value, seen: &Observed, maker: &str) -> Option<Draw> {
    let Value::Tensor { origin: None, .. } = made else {
        return None;
    };
    let (low, high) = (seen.min, seen.max);
    if !is_float(dtype) || !low.is_finite() || !high.is_finite() || low < 0.0 || high <= low {
        return None;
    }
    let rows = if seen.rows_sum_to_one {
        "; each of its rows sums to 1 there (a probability distribution, such as a softmax's output), which \
         ksearch's uniform draws do not reproduce, so the task checks the model's formula on rows that do not sum \
         to 1: a candidate must not rely on that property"
    } else {
        ""
    };
    let note = Some(format!(
        "'{name}' is computed in {maker}; its values there lie in [{low:.3e}, {high:.3e}], none negative, so task.toml \
         draws it uniformly from that range instead of from ksearch's trial distributions{rows}"
    ));
    Some(Draw {
        distribution: Some((
            Distribution::Uniform { low, high },
            format!(
                "{maker} computes '{name}' (not straight from one torch factory); its values on the problem's own \
                 inputs lie in [{low:.3e}, {high:.3e}], none negative, so it is drawn uniformly from that range: ksearch's \
                 trial distributions would make it negative, where a log or square root of it is NaN"
            ),
        )),
        note,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn computed() -> Value {
        Value::Tensor {
            shape: vec![4, 8],
            dtype: "float32".into(),
            origin: None,
        }
    }

    #[test]
    fn computed_non_negative_inputs_are_drawn_from_their_range_and_others_keep_their_draw() {
        let seen = Observed {
            min: 0.01,
            max: 0.3,
            rows_sum_to_one: true,
        };
        let draw = observed("p", DType::Float32, &computed(), &seen, "get_inputs()").unwrap();
        let (dist, why) = draw.distribution.unwrap();
        assert_eq!(dist, Distribution::Uniform { low: 0.01, high: 0.3 });
        assert!(why.contains("[1.000e-2, 3.000e-1]"), "{why}");
        let note = draw.note.unwrap();
        assert!(note.contains("sums to 1") && note.contains("must not rely"), "{note}");
        let plain = Observed {
            rows_sum_to_one: false,
            ..seen
        };
        let note = observed("p", DType::Float32, &computed(), &plain, "get_inputs()")
            .unwrap()
            .note
            .unwrap();
        assert!(!note.contains("sums to 1"), "{note}");
        // Negative values, a constant, integers, or an input straight from a factory (whose
        // draw choose() carries over) are left alone.
        let negative = Observed { min: -0.5, ..seen };
        assert!(observed("p", DType::Float32, &computed(), &negative, "g").is_none());
        let constant = Observed { max: 0.01, ..seen };
        assert!(observed("p", DType::Float32, &computed(), &constant, "g").is_none());
        assert!(observed("p", DType::Int64, &computed(), &seen, "g").is_none());
        let made = Value::Tensor {
            shape: vec![4],
            dtype: "float32".into(),
            origin: Some(serde_json::from_value(serde_json::json!({"fn": "rand"})).unwrap()),
        };
        assert!(observed("p", DType::Float32, &made, &seen, "g").is_none());
    }
}
