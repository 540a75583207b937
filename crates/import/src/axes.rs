//! Axes from observed shapes: every dimension of every tensor, seen in each workload, becomes an
//! axis; dimensions whose sizes agree in every workload share one; a dimension of one size
//! everywhere is a const axis, others are var axes. Names come from the problem's own numbers
//! (KernelBench's module constants, GPU MODE's test arguments) where one matches.

use indexmap::IndexMap;
use ksearch_spec::Axis;

/// The axes of a definition and the shape of each tensor in axis names.
#[derive(Debug)]
pub(crate) struct AxisPlan {
    pub axes: IndexMap<String, Axis>,
    /// Tensor name -> one axis name per dimension.
    pub shapes: IndexMap<String, Vec<String>>,
    /// Per workload, the value of every var axis.
    pub var_values: Vec<IndexMap<String, i64>>,
}

impl AxisPlan {
    /// The axis whose value is `values[w]` in every workload `w`, if any.
    pub(crate) fn axis_with_values(&self, values: &[i64]) -> Option<&str> {
        self.axes.iter().find_map(|(name, axis)| {
            let matches = match axis {
                Axis::Const { value, .. } => values.iter().all(|v| v == value),
                Axis::Var { .. } => {
                    values.len() == self.var_values.len()
                        && self.var_values.iter().zip(values).all(|(w, v)| w.get(name) == Some(v))
                }
            };
            matches.then_some(name.as_str())
        })
    }
}

/// A named number of the problem with its value in each workload (`batch_size`, `size`).
pub(crate) struct Hint {
    pub name: String,
    pub values: Vec<i64>,
    /// Where the name comes from, for the axis description.
    pub source: String,
}

/// `tensors`: name and its shape in each of `workloads` workloads (all of one rank). Errors
/// name the tensor and dimension that cannot be an axis.
pub(crate) fn plan(tensors: &[(String, Vec<Vec<i64>>)], hints: &[Hint], workloads: usize) -> Result<AxisPlan, String> {
    let mut groups: Vec<(Vec<i64>, String)> = Vec::new();
    let mut axes: IndexMap<String, Axis> = IndexMap::new();
    let mut shapes: IndexMap<String, Vec<String>> = IndexMap::new();
    for (tensor, per_workload) in tensors {
        let rank = per_workload.first().map_or(0, |s| s.len());
        if let Some((w, s)) = per_workload.iter().enumerate().find(|(_, s)| s.len() != rank) {
            return Err(format!(
                "'{tensor}' has {rank} dimensions in workload 0 but {} in workload {w}",
                s.len()
            ));
        }
        let mut names = Vec::new();
        for d in 0..rank {
            let values: Vec<i64> = per_workload.iter().map(|s| s[d]).collect();
            if let Some(w) = values.iter().position(|v| *v <= 0) {
                return Err(format!(
                    "dimension {d} of '{tensor}' has size {} in workload {w}; ksearch axes are positive",
                    values[w]
                ));
            }
            if let Some((_, name)) = groups.iter().find(|(v, _)| *v == values) {
                names.push(name.clone());
                continue;
            }
            let hint = hints
                .iter()
                .find(|h| h.values == values && !axes.contains_key(&identifier(&h.name)));
            let base = hint.map_or_else(|| format!("{tensor}_dim{d}"), |h| identifier(&h.name));
            let mut name = base.clone();
            let mut n = 2;
            while axes.contains_key(&name) {
                name = format!("{base}_{n}");
                n += 1;
            }
            let description = Some(match hint {
                Some(h) => format!("{} ({})", h.name, h.source),
                None => format!("dimension {d} of {tensor}"),
            });
            let constant = values.iter().all(|v| *v == values[0]);
            let axis = if constant {
                Axis::Const {
                    value: values[0],
                    description,
                }
            } else {
                Axis::Var {
                    description,
                    parent: None,
                }
            };
            axes.insert(name.clone(), axis);
            groups.push((values, name.clone()));
            names.push(name);
        }
        shapes.insert(tensor.clone(), names);
    }
    let var_values = (0..workloads)
        .map(|w| {
            groups
                .iter()
                .filter(|(_, name)| matches!(axes[name], Axis::Var { .. }))
                .map(|(values, name)| (name.clone(), values[w]))
                .collect()
        })
        .collect();
    Ok(AxisPlan {
        axes,
        shapes,
        var_values,
    })
}

/// `text` as an identifier: other characters become `_`, a leading digit gets an `n` before it.
pub(crate) fn identifier(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(name: &str, values: &[i64]) -> Hint {
        Hint {
            name: name.into(),
            values: values.to_vec(),
            source: "test".into(),
        }
    }

    #[test]
    fn shared_dimensions_share_an_axis_and_constant_ones_are_const() {
        let tensors = vec![
            ("image".to_string(), vec![vec![16, 16, 3], vec![33, 33, 3]]),
            ("out".to_string(), vec![vec![16, 16], vec![33, 33]]),
        ];
        let p = plan(&tensors, &[hint("size", &[16, 33])], 2).unwrap();
        assert_eq!(p.shapes["image"], ["size", "size", "image_dim2"]);
        assert_eq!(p.shapes["out"], ["size", "size"]);
        assert!(matches!(p.axes["image_dim2"], Axis::Const { value: 3, .. }));
        assert!(matches!(p.axes["size"], Axis::Var { .. }));
        assert_eq!(p.var_values[1]["size"], 33);
        assert_eq!(p.var_values[0].len(), 1);
    }

    #[test]
    fn hints_name_axes_once_and_bad_sizes_are_refused() {
        let tensors = vec![("x".to_string(), vec![vec![64, 64, 8]])];
        let p = plan(&tensors, &[hint("M", &[64]), hint("1st", &[8])], 1).unwrap();
        assert_eq!(p.shapes["x"], ["M", "M", "n1st"]);
        let e = plan(&[("x".to_string(), vec![vec![4, 0]])], &[], 1).unwrap_err();
        assert_eq!(
            e,
            "dimension 1 of 'x' has size 0 in workload 0; ksearch axes are positive"
        );
        let e = plan(&[("x".to_string(), vec![vec![4], vec![4, 4]])], &[], 2).unwrap_err();
        assert!(e.contains("1 dimensions in workload 0 but 2 in workload 1"), "{e}");
    }
}
