//! The task.toml of a GPU MODE import: its header, the tests and benchmarks left out, the
//! tolerances read from check_implementation, the input draws and the kernel settings.

use crate::draws::{self, Draw};
use crate::emit;
use crate::gpumode_files::MODULES;
use crate::probe::GpuModeProbe;
use ksearch_spec::DType;

/// The atol the task gives float dtype `d`: check_implementation's literal one, else ksearch's
/// default (KernelBench's); `None` for other dtypes.
pub(crate) fn atol_for(found: &GpuModeProbe, d: DType) -> Option<f64> {
    if !draws::is_float(d) {
        return None;
    }
    match &found.tolerance {
        Some(t) if !t.custom && t.rtol.is_some() => t.atol.or(crate::tolerances::kernelbench_default(d)),
        _ => crate::tolerances::kernelbench_default(d),
    }
}

/// task.toml `[tolerance]` tables from check_implementation, and the note about it.
pub(crate) fn tolerance(found: &GpuModeProbe, dtypes: &[DType]) -> (String, String) {
    let floats: Vec<DType> = dtypes.iter().copied().filter(|d| draws::is_float(*d)).collect();
    match &found.tolerance {
        Some(t) if !t.custom && t.rtol.is_some() && t.atol.is_some() => {
            let (rtol, atol) = (t.rtol.unwrap_or_default(), t.atol.unwrap_or_default());
            let origin = if let Some(origin) = &t.origin {
                origin.clone()
            } else if t.defaults.is_empty() {
                format!("check_implementation = make_match_reference(ref_kernel, rtol={rtol}, atol={atol})")
            } else {
                format!(
                    "check_implementation = make_match_reference(ref_kernel{}), with utils.match_reference's default {}",
                    t.literal.iter().map(|k| format!(", {k}=...")).collect::<String>(),
                    t.defaults.join(" and ")
                )
            };
            let mut toml = String::new();
            for d in &floats {
                toml.push_str(&format!("\n[tolerance.{d}]\n"));
                toml.push_str(&emit::comment(&format!("From reference.py: {origin}.")));
                toml.push_str(&format!("atol = {}\nrtol = {}\n", emit::toml_float(atol), emit::toml_float(rtol)));
            }
            let floats_named = floats.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ");
            let note = match &t.origin {
                Some(origin) => format!(
                    "reference.py has no check_implementation: ksearch compares every element, |out - ref| <= atol + \
                     rtol * |ref|, with {origin} (atol {atol}, rtol {rtol}) for {floats_named} outputs"
                ),
                None => format!(
                    "check_implementation is replaced by ksearch's per-element comparison |out - ref| <= atol + rtol * \
                     |ref| with its tolerances (atol {atol}, rtol {rtol}) for {floats_named} outputs"
                ),
            };
            (toml, note)
        }
        Some(t) if t.custom => (
            String::new(),
            format!(
                "check_implementation is custom code{}, not carried over: ksearch compares every element with its \
                 default tolerances; set [tolerance.DTYPE] in task.toml to match the original",
                t.why.as_deref().map(|w| format!(" ({w})")).unwrap_or_default()
            ),
        ),
        _ => (
            String::new(),
            "reference.py's check_implementation gives no tolerances ksearch can read: ksearch's default tolerances apply"
                .into(),
        ),
    }
}

/// What task.toml's [kernel] table says beyond the fixed entries.
pub(crate) struct KernelTable<'a> {
    /// "tuple" or "single": how custom_kernel gets its inputs.
    pub calling: &'a str,
    /// Inputs generate_input made with torch.empty, which a submission may fill.
    pub writable: &'a [String],
    /// The helper modules written to the task's MODULES folder (task, utils), by name.
    pub helper_modules: Vec<&'a str>,
}

pub(crate) fn task_toml(
    folder: &str,
    engine: &str,
    chosen: &[(String, Draw)],
    evaluation_rest: &str,
    kernel: &KernelTable<'_>,
    left_out: &[&str],
) -> String {
    let KernelTable {
        calling,
        writable,
        helper_modules,
    } = kernel;
    let mut t =
        emit::comment(&format!(
        "Imported from GPU MODE task {folder} by `ksearch import gpumode` (shapes found with {}). docs/importers.md \
         says what is carried over and what is not.",
        if engine == "stand-in" { "ksearch's stand-in for PyTorch".to_string() } else { engine.to_string() }
    ));
    for why in left_out {
        t.push_str(&emit::comment(&format!("Tests and benchmarks left out: {why}.")));
    }
    t.push_str("\n[evaluation]\ntrials = 3\n");
    // The rest of [evaluation] (its time limit), then the [tolerance.DTYPE] tables.
    t.push_str(evaluation_rest);
    t.push_str(&crate::inputs_toml(chosen));
    t.push_str("\n[kernel]\nlanguage = \"python\"\nentry = \"custom_kernel\"\n");
    t.push_str(&emit::comment(if *calling == "tuple" {
        "custom_kernel(data) gets the inputs as one tuple, in generate_input's order, and returns the output."
    } else {
        "custom_kernel(data) gets the one tensor generate_input makes, and returns the output."
    }));
    t.push_str(&format!("calling = \"{calling}\"\nseed = \"seed.py\"\n"));
    // Only where the folder has helper modules: python_path names folders that must exist, and
    // a reference.py that imports none (princeton's cross_entropy) gets no MODULES folder.
    if !helper_modules.is_empty() {
        let files: Vec<String> = helper_modules.iter().map(|m| format!("{m}.py")).collect();
        t.push_str(&emit::comment(&format!(
            "The folder's helper modules ({}): candidates import them from here.",
            files.join(", ")
        )));
        t.push_str(&format!("python_path = [\"{MODULES}\"]\n"));
    }
    if !writable.is_empty() {
        t.push_str(&emit::comment(
            "Made with torch.empty by generate_input: output buffers a submission may fill (and return).",
        ));
        let names: Vec<String> = writable.iter().map(|n| emit::toml_str(n)).collect();
        t.push_str(&format!("writable_inputs = [{}]\n", names.join(", ")));
    }
    t
}
