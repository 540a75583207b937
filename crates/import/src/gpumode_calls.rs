//! Which of a GPU MODE task's tests and benchmarks become workloads: every call must give
//! generate_input's value the same structure (refused otherwise, naming the difference); where
//! only dtypes differ, the dtype most calls agree on is kept and the others are left out, said
//! so; and a workload where an output of ref_kernel is zero everywhere whatever the inputs'
//! values (measured at import) is left out, since ksearch eval refuses a reference that cannot
//! tell a correct kernel from one that writes zeros.

use crate::probe::{GpuModeProbe, Value};

/// A test or benchmark: its workload name (`test-0`) and its arguments.
pub(crate) type Call = (String, serde_json::Map<String, serde_json::Value>);

/// The calls kept (indices into the probe's calls), and what the report says about the others.
pub(crate) struct Kept {
    pub(crate) indices: Vec<usize>,
    pub(crate) note: Option<String>,
}

fn kind(v: &Value) -> String {
    match v {
        Value::Tensor { dtype, shape, .. } => format!("a {}-D {dtype} tensor", shape.len()),
        Value::Scalar { dtype, .. } => format!("a {dtype} number"),
    }
}

fn rank(v: &Value) -> Option<usize> {
    match v {
        Value::Tensor { shape, .. } => Some(shape.len()),
        Value::Scalar { .. } => None,
    }
}

fn dtype(v: &Value) -> &str {
    match v {
        Value::Tensor { dtype, .. } | Value::Scalar { dtype, .. } => dtype,
    }
}

/// Every call must give the same number and kinds of values (tensor or number, rank); where
/// they differ in dtypes only, the calls of the dtypes most of them have are kept (a strict
/// plurality; refused on a tie), and the note names the others and the values that differ.
pub(crate) fn choose(found: &GpuModeProbe, calls: &[Call]) -> Result<Kept, String> {
    let first = found.calls.first().ok_or("the probe returned no calls")?;
    // Named as the inputs will be: the flattened names, else ref_kernel's unpacking.
    let names = first
        .leaf_names
        .as_ref()
        .or(found.input_names.as_ref().filter(|n| n.len() == first.inputs.len()));
    let value_name = |j: usize| match names {
        Some(names) if j < names.len() => format!("'{}' of generate_input's value", names[j]),
        _ => format!("generate_input's value {j}"),
    };
    // The values of a call, named, inputs then outputs.
    let values = |w: usize| -> Vec<(String, &Value)> {
        let c = &found.calls[w];
        let inputs = c.inputs.iter().enumerate().map(|(j, v)| (value_name(j), v));
        let outputs = c
            .outputs
            .iter()
            .enumerate()
            .map(|(j, v)| (format!("ref_kernel's output {j}"), v));
        inputs.chain(outputs).collect()
    };
    for (w, c) in found.calls.iter().enumerate().skip(1) {
        let name = &calls[w].0;
        // Why the value changes, when list arguments of other lengths explain it.
        let lists = list_lengths_differ(&calls[0], &calls[w]);
        if c.rebuild != first.rebuild {
            return Err(format!(
                "generate_input's value has another structure or other constants for {name} ({}) than for {} ({}); \
                 ksearch needs one structure for every test and benchmark (a definition has one set of inputs){lists}",
                clip(c.rebuild.as_deref().unwrap_or("a flat tuple")),
                calls[0].0,
                clip(first.rebuild.as_deref().unwrap_or("a flat tuple")),
            ));
        }
        if c.bare != first.bare || c.inputs.len() != first.inputs.len() {
            return Err(format!(
                "generate_input returns {} values for {} but {} for {name}{lists}",
                first.inputs.len(),
                calls[0].0,
                c.inputs.len()
            ));
        }
        if c.outputs.len() != first.outputs.len() {
            return Err(format!(
                "ref_kernel returns {} outputs for {} but {} for {name}{lists}",
                first.outputs.len(),
                calls[0].0,
                c.outputs.len()
            ));
        }
        for ((what, a), (_, b)) in values(0).into_iter().zip(values(w)) {
            if rank(a) != rank(b) {
                return Err(format!(
                    "{what} is {} for {} but {} for {name}{lists}",
                    kind(a),
                    calls[0].0,
                    kind(b)
                ));
            }
        }
    }
    if first.outputs.is_empty() {
        return Err("ref_kernel returned no tensor".into());
    }
    if first.inputs.is_empty() {
        return Err("generate_input returned an empty tuple".into());
    }

    // Groups of calls with the same dtypes, in order of first appearance.
    let dtypes = |w: usize| -> Vec<String> { values(w).iter().map(|(_, v)| dtype(v).to_string()).collect() };
    let mut groups: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for w in 0..found.calls.len() {
        let d = dtypes(w);
        match groups.iter_mut().find(|(g, _)| *g == d) {
            Some((_, members)) => members.push(w),
            None => groups.push((d, vec![w])),
        }
    }
    if groups.len() == 1 {
        return Ok(Kept {
            indices: (0..found.calls.len()).collect(),
            note: None,
        });
    }
    let most = groups.iter().map(|(_, m)| m.len()).max().unwrap_or(0);
    let leaders: Vec<&(Vec<String>, Vec<usize>)> = groups.iter().filter(|(_, m)| m.len() == most).collect();
    // What differs between two calls, as "X is a ... for A but a ... for B".
    let differ = |a: usize, b: usize| -> String {
        values(a)
            .into_iter()
            .zip(values(b))
            .filter(|((_, x), (_, y))| dtype(x) != dtype(y))
            .map(|((what, x), (_, y))| {
                format!(
                    "{what} is {} for {} but {} for {}",
                    kind(x),
                    calls[a].0,
                    kind(y),
                    calls[b].0
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let listed = |m: &[usize]| m.iter().map(|&w| calls[w].0.clone()).collect::<Vec<_>>().join(", ");
    if leaders.len() > 1 {
        return Err(format!(
            "{}; a definition has one dtype per input, and as many tests and benchmarks have each ({} each: {}), \
             so there is no majority to keep: import each group as a task of its own (a copy of the folder whose \
             task.yml keeps only its tests and benchmarks)",
            differ(leaders[0].1[0], leaders[1].1[0]),
            most,
            leaders.iter().map(|(_, m)| listed(m)).collect::<Vec<_>>().join(" / ")
        ));
    }
    let kept = &leaders[0].1;
    let left: Vec<&(Vec<String>, Vec<usize>)> = groups.iter().filter(|(_, m)| m.len() != most).collect();
    let count: usize = left.iter().map(|(_, m)| m.len()).sum();
    let why: Vec<String> = left
        .iter()
        .map(|(_, m)| format!("{} ({})", listed(m), differ(kept[0], m[0])))
        .collect();
    Ok(Kept {
        indices: kept.clone(),
        note: Some(format!(
            "{count} of {} tests and benchmarks were left out, since a definition has one dtype per input and \
             {} of them agree on the dtypes kept: {}; import those as a task of their own (a copy of the folder \
             whose task.yml keeps only them)",
            found.calls.len(),
            kept.len(),
            why.join("; ")
        )),
    })
}

/// `text`, or its first 150 characters and how many more there are (a group GEMM's
/// structure for eight groups is a long expression).
fn clip(text: &str) -> String {
    const KEEP: usize = 150;
    let count = text.chars().count();
    if count <= KEEP {
        return text.to_string();
    }
    let head: String = text.chars().take(KEEP).collect();
    format!("{head}... ({} more characters)", count - KEEP)
}

/// For a structure that changes between two calls: the list arguments whose lengths differ
/// between them (a group count that follows the tests' per-group sizes), as a clause for the
/// message, or "".
fn list_lengths_differ(a: &Call, b: &Call) -> String {
    // The lengths of a list and of the lists nested in it, in order.
    fn lengths(v: &serde_json::Value, out: &mut Vec<usize>) {
        if let Some(items) = v.as_array() {
            out.push(items.len());
            items.iter().for_each(|item| lengths(item, out));
        }
    }
    let differ: Vec<String> =
        a.1.iter()
            .filter_map(|(k, va)| {
                let vb = b.1.get(k)?;
                let (xa, xb) = (va.as_array()?, vb.as_array()?);
                if xa.len() != xb.len() {
                    return Some(format!(
                        "'{k}' has {} elements for {} but {} for {}",
                        xb.len(),
                        b.0,
                        xa.len(),
                        a.0
                    ));
                }
                let (mut la, mut lb) = (Vec::new(), Vec::new());
                lengths(va, &mut la);
                lengths(vb, &mut lb);
                (la != lb).then(|| {
                    format!(
                        "the lists nested in '{k}' have other lengths for {} than for {}",
                        b.0, a.0
                    )
                })
            })
            .collect();
    if differ.is_empty() {
        String::new()
    } else {
        format!(
            ": generate_input's value follows the lengths of the tests' list arguments, which differ ({}); \
             import the tests and benchmarks of one length as a task of their own",
            differ.join("; ")
        )
    }
}

/// What the measurements say about the workloads (by index into the kept calls).
pub(crate) struct Zeros {
    /// Workloads to leave out, and why (for the report, task.toml and the description).
    pub(crate) dropped: Vec<(usize, String)>,
    /// Other findings for the report.
    pub(crate) notes: Vec<String>,
}

/// The workloads `candidates` (indices into `found.calls`, the first call of each distinct
/// size) where an output of ref_kernel is zero everywhere, on generate_input's own value and on
/// that value redrawn: left out. `outputs`: each output's name and the atol the task gives its
/// dtype (`None` for non-float outputs).
pub(crate) fn zero_workloads(
    found: &GpuModeProbe,
    calls: &[Call],
    candidates: &[usize],
    outputs: &[(String, Option<f64>)],
) -> Zeros {
    let mut z = Zeros {
        dropped: Vec::new(),
        notes: Vec::new(),
    };
    for &w in candidates {
        let Some(m) = &found.calls[w].measured else {
            continue;
        };
        let args = serde_json::Value::Object(calls[w].1.clone());
        let mut zero: Vec<String> = Vec::new();
        for (j, (name, atol)) in outputs.iter().enumerate() {
            let Some(Some(own)) = m.largest.get(j).copied() else {
                continue;
            };
            let redrawn = m.redrawn.as_ref().and_then(|r| r.get(j).copied().flatten());
            if own == 0.0 && redrawn == Some(0.0) {
                zero.push(format!("'{name}' (ref_kernel's output {j})"));
            } else if own == 0.0 {
                z.notes.push(format!(
                    "ref_kernel's output '{name}' is zero everywhere on generate_input's own value for {} ({args}), \
                     but not on values redrawn from a normal distribution: kept, since ksearch draws its own inputs",
                    calls[w].0
                ));
            } else if let Some(atol) = atol.filter(|a| own <= *a) {
                z.notes.push(format!(
                    "ref_kernel's output '{name}' has values up to {own:e} on generate_input's own value for {}, not \
                     above the task's atol {atol:e}: ksearch eval refuses a workload where ksearch's draws give the \
                     same; set [tolerance.DTYPE] lower if it does",
                    calls[w].0
                ));
            }
        }
        if !zero.is_empty() {
            z.dropped.push((
                w,
                format!(
                    "{} ({args}) is left out: {} {} zero everywhere on it, on generate_input's own value and on \
                     values redrawn from a normal distribution, so no tolerance can tell a correct kernel from one \
                     that writes zeros there (ksearch eval refuses such a workload)",
                    calls[w].0,
                    zero.join(" and "),
                    if zero.len() == 1 { "is" } else { "are" }
                ),
            ));
        }
    }
    z
}
