//! KernelBench's tolerances, and the ones the importer derives where they cannot tell a correct
//! output from zeros: ksearch refuses a reference whose every output is within atol of zero
//! (a softmax over 400k columns has values near 2.5e-6, below fp32's 1e-4).

use crate::emit;
use ksearch_spec::DType;

/// How far above atol the largest |output| measured at import must be for KernelBench's atol to
/// be kept: the harness's trial distributions (uniform, heavy-tailed) give other magnitudes than
/// the problem's own `torch.randn` inputs the importer measured on.
const MARGIN: f64 = 10.0;

/// KernelBench's own tolerance for `d` (fp32 1e-4, fp16/bf16 1e-2), `None` for non-floats.
pub(crate) fn kernelbench_default(d: DType) -> Option<f64> {
    match d.name() {
        "float16" | "bfloat16" => Some(1e-2),
        "float32" | "float64" => Some(1e-4),
        _ => None,
    }
}

/// An atol that tells `largest` (the largest |output| measured) from zero with room to spare:
/// three decades below its leading power of ten.
pub(crate) fn derived_atol(largest: f64) -> Option<f64> {
    if !largest.is_finite() || largest <= 0.0 {
        return None;
    }
    Some(10f64.powi(largest.log10().floor() as i32 - 3))
}

/// `[tolerance.DTYPE]` tables for the outputs whose largest measured |value| is too small for
/// KernelBench's atol, and the report's lines saying so. `outputs`: (name, dtype, largest |value|
/// measured at import, `None` when it was not measured).
pub(crate) fn kernelbench(outputs: &[(String, DType, Option<f64>)]) -> (String, Vec<String>) {
    let mut per_dtype: Vec<(DType, f64, f64, Vec<String>)> = Vec::new();
    let mut notes = Vec::new();
    for (name, dtype, largest) in outputs {
        let Some(atol) = kernelbench_default(*dtype) else {
            continue;
        };
        let Some(m) = largest else { continue };
        if *m > atol * MARGIN {
            continue;
        }
        let Some(derived) = derived_atol(*m) else {
            notes.push(format!(
                "output '{name}' was all zeros (or not finite) when the importer ran the model: no tolerance can tell \
                 a correct kernel from one that writes zeros; check the problem"
            ));
            continue;
        };
        match per_dtype.iter_mut().find(|(d, ..)| d == dtype) {
            Some(entry) => {
                entry.1 = entry.1.min(derived);
                entry.3.push(name.clone());
            }
            None => per_dtype.push((*dtype, derived.min(atol), atol, vec![name.clone()])),
        }
        notes.push(format!(
            "output '{name}' has values up to {m:.3e} on the problem's inputs, too close to KernelBench's atol {atol:e} \
             for {dtype} to tell a correct kernel from one that writes zeros: task.toml sets atol {derived:e} (rtol \
             stays KernelBench's {atol:e})"
        ));
    }
    let mut toml = String::new();
    for (dtype, atol, rtol, names) in per_dtype {
        toml.push_str(&format!("\n[tolerance.{dtype}]\n"));
        toml.push_str(&emit::comment(&format!(
            "Derived by the importer: {} stays below KernelBench's atol, so it is three decades below the largest \
             value measured on the problem's inputs.",
            names.join(", ")
        )));
        toml.push_str(&format!(
            "atol = {}\nrtol = {}\n",
            emit::toml_float(atol),
            emit::toml_float(rtol)
        ));
    }
    (toml, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernelbench_tolerances_are_kept_where_they_discriminate_and_derived_where_not() {
        let (toml, notes) = kernelbench(&[
            ("output".into(), DType::Float32, Some(8.1e-5)),
            ("big".into(), DType::Float32, Some(3.0)),
            ("half".into(), DType::Float16, Some(0.5)),
            ("unmeasured".into(), DType::Float32, None),
        ]);
        let table: toml::Table = toml.parse().unwrap_or_else(|e| panic!("{e}\n{toml}"));
        let f32 = &table["tolerance"]["float32"];
        assert_eq!(
            (f32["atol"].as_float(), f32["rtol"].as_float()),
            (Some(1e-8), Some(1e-4)),
            "{toml}"
        );
        assert!(!toml.contains("float16"), "fp16's 1e-2 discriminates at 0.5: {toml}");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("'output'") && notes[0].contains("task.toml sets atol"));
        let (toml, notes) = kernelbench(&[("z".into(), DType::Float32, Some(0.0))]);
        assert!(toml.is_empty() && notes[0].contains("all zeros"), "{notes:?}");
        assert_eq!(derived_atol(8.1e-5), Some(1e-8));
    }
}
