//! Inputs a GPU MODE problem computes (an SPD matrix built from a random one, a spectrum planted
//! in an orthogonal basis): ksearch cannot draw them from a distribution, and its own draws can
//! make the reference meaningless (a Cholesky factor of a matrix that is not positive definite
//! is zeros). With PyTorch the probe writes generate_input's own values of such inputs to
//! safetensors files, and each workload gives them (`{"type": "safetensors"}` in
//! workloads.jsonl), the same in every trial.

use crate::draws::Draw;
use crate::probe::{GpuModeProbe, Value};
use std::path::{Path, PathBuf};

/// The workloads' given inputs, the files to copy into the task's `blob/` folder and what to
/// tell the user.
#[derive(Debug, Default)]
pub(crate) struct Given {
    /// (path in the task folder, the probe's file).
    pub blobs: Vec<(String, PathBuf)>,
    pub notes: Vec<String>,
    /// The calls (indices into `found.calls`) whose workloads lack the values of a computed
    /// input that other workloads give: left out, since ksearch's draws would test something
    /// else there (the reference on a matrix that is not positive definite).
    pub dropped: Vec<usize>,
}

/// `inputs`: the input names in generate_input's order; `chosen`: the draw of each tensor input
/// (a computed one carries a note and no distribution); `workloads`: (index of the call in
/// `found.calls`, its workloads.jsonl object), whose `inputs` maps gain the given ones.
pub(crate) fn give(
    found: &GpuModeProbe,
    inputs: &[String],
    chosen: &mut [(String, Draw)],
    workloads: &mut [(usize, serde_json::Value)],
    scratch: &Path,
) -> Given {
    let mut given = Given::default();
    let total = workloads.len();
    for (name, draw) in chosen.iter_mut() {
        if draw.distribution.is_some() || draw.note.is_none() {
            continue;
        }
        let Some(j) = inputs.iter().position(|n| n == name) else {
            continue;
        };
        let mut missing: Vec<(usize, String)> = Vec::new();
        let mut gave = 0;
        for (w, workload) in workloads.iter_mut() {
            // Where a torch factory made it in this call, ksearch's draw stands (the factory
            // is what the problem does there).
            if let Value::Tensor { origin: Some(_), .. } = &found.calls[*w].inputs[j] {
                continue;
            }
            let saved = found.calls[*w].measured.as_ref().and_then(|m| m.saved.as_ref());
            let Some((file, saved)) = saved.and_then(|s| s.file.as_ref().map(|f| (f, s))) else {
                missing.push((*w, uuid(workload)));
                continue;
            };
            if !saved.inputs.contains(&j) {
                missing.push((*w, uuid(workload)));
                continue;
            }
            let rel = format!("blob/{file}");
            if !given.blobs.iter().any(|(r, _)| *r == rel) {
                given.blobs.push((rel.clone(), scratch.join(file)));
            }
            if let Some(map) = workload.get_mut("inputs").and_then(|v| v.as_object_mut()) {
                map.insert(
                    name.clone(),
                    serde_json::json!({"type": "safetensors", "path": rel, "tensor_key": format!("input_{j}")}),
                );
                gave += 1;
            }
        }
        if gave == 0 {
            continue;
        }
        let mut note = format!(
            "'{name}' is computed in generate_input (not straight from one torch factory): {} the problem's own \
             values, written at import to blob/ (the same in every trial)",
            if gave == total {
                "every workload gives".to_string()
            } else {
                format!("{gave} of {total} workloads give")
            }
        );
        if !missing.is_empty() {
            note.push_str(&format!(
                "; left out: {} (generate_input was not run for real there at import: over the probe's size limit, \
                 or its values over the size budget for blob/), since ksearch's own draws of '{name}' would test \
                 something else",
                missing.iter().map(|(_, u)| u.as_str()).collect::<Vec<_>>().join(", ")
            ));
            for (w, _) in missing {
                if !given.dropped.contains(&w) {
                    given.dropped.push(w);
                }
            }
        }
        draw.note = None;
        given.notes.push(note);
    }
    // A workload left out for one input may have given another: copy only the files the kept
    // workloads name.
    let named: Vec<&str> = workloads
        .iter()
        .filter(|(w, _)| !given.dropped.contains(w))
        .filter_map(|(_, workload)| workload.get("inputs")?.as_object())
        .flat_map(|map| map.values().filter_map(|v| v.get("path")?.as_str()))
        .collect();
    given.blobs.retain(|(rel, _)| named.contains(&rel.as_str()));
    for call in &found.calls {
        if let Some(saved) = call.measured.as_ref().and_then(|m| m.saved.as_ref()) {
            for why in &saved.skipped {
                if !given.notes.iter().any(|n| n.ends_with(why.as_str())) {
                    given.notes.push(format!("a computed input was not saved: {why}"));
                }
            }
        }
    }
    given
}

fn uuid(workload: &serde_json::Value) -> String {
    workload.get("uuid").and_then(|u| u.as_str()).unwrap_or("?").to_string()
}
