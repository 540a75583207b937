//! `ksearch export RUN_DIR [--out FILE]`: the run's best candidate as a FlashInfer-Bench
//! Solution JSON (docs/task-format.md, "ksearch export"), for a FlashInfer-Bench dataset's
//! `solutions/` folder.

use anyhow::Context;
use ksearch_search::engine::{Engine, Request};
use ksearch_spec::Language;
use std::path::{Path, PathBuf};

/// The arguments of `ksearch export`.
#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Write the Solution JSON to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Writes the run's best candidate as a Solution JSON; returns the exit status.
pub(crate) fn run(args: &ExportArgs) -> anyhow::Result<u8> {
    let open = ksearch_run::open::open_read(&args.run_dir)?;
    let events = crate::run_cmd::load_events(&open.store)?;
    let engine = Engine::replay(&events).context("the run's event log does not replay")?;
    let best = match engine.pending() {
        Some(Request::Finished { best_candidate, .. }) => *best_candidate,
        _ => engine.best().map(|b| b.id),
    };
    let Some(candidate) = best.and_then(|id| engine.candidate(id)) else {
        eprintln!(
            "error: {}: no candidate has passed yet, so there is nothing to export",
            args.run_dir.display()
        );
        return Ok(crate::EXIT_FAILED);
    };
    let rows = open.store.candidates()?;
    let language = rows
        .iter()
        .find(|r| r.id == candidate.id)
        .map(|r| r.language.clone())
        .unwrap_or_else(|| open.task.config.kernel.language.to_string());
    let mut solution =
        ksearch_run::candidate_solution(&open.task, &engine, candidate.id, &language, &candidate.sources)
            .map_err(|why| anyhow::anyhow!("candidate {} is not a solution of the task: {why}", candidate.id))?;
    let run_name = run_name(&args.run_dir);
    solution.name = format!("{}_ksearch_{run_name}_c{}", open.task.definition.name, candidate.id);
    let evaluations = open.store.evaluations()?;
    let record = evaluations
        .iter()
        .filter(|e| e.candidate_id == candidate.id && e.status == "passed")
        .max_by_key(|e| (e.purpose == "final", e.id))
        .map(|e| &e.record);
    // The CPU backends record the device as `cpu` (the model is the CPU's, which
    // FlashInfer-Bench does not name); a GPU by its model.
    let on_cpu = record.is_some_and(|r| {
        r["provenance"]["device"]
            .as_str()
            .is_some_and(|d| d == "cpu" || d.ends_with(":cpu"))
    });
    let device = record.map(|r| ksearch_report::device_of(r).model);
    let summary = candidate.final_result.as_ref().or(candidate.result.as_ref());
    let speedup = summary
        .and_then(|s| s.speedup)
        .map(|s| format!(", {s:.2}x the definition's reference (geometric mean over its workloads)"))
        .unwrap_or_default();
    solution.description = Some(format!(
        "ksearch run {run_name}, candidate {} (round {}){speedup}{}",
        candidate.id,
        candidate.round,
        device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default()
    ));
    let hardware = match on_cpu {
        true => vec!["cpu".to_string()],
        false => target_hardware(device.as_deref(), &open.task.config.targets, solution.spec.language),
    };
    let author = format!("ksearch ({})", open.brain.describe());
    let (json, notes) = ksearch_spec::to_flashinfer_bench(&solution, &author, &hardware)
        .with_context(|| format!("{}: the best candidate cannot be exported", args.run_dir.display()))?;
    let text = serde_json::to_string_pretty(&json).context("cannot encode the solution as JSON")?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    match &args.out {
        Some(path) => {
            std::fs::write(path, format!("{text}\n")).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "wrote {} (candidate {} of {}, as FlashInfer-Bench solution '{}')",
                path.display(),
                candidate.id,
                args.run_dir.display(),
                solution.name
            );
        }
        None => println!("{text}"),
    }
    Ok(0)
}

/// The run folder's name, in the characters a solution name keeps (`[A-Za-z0-9_-]`).
fn run_name(run_dir: &Path) -> String {
    let name = run_dir
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| "run".into());
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FlashInfer-Bench's `target_hardware`: the GPU the best candidate was measured on, in its
/// spelling (`NVIDIA H200` -> `NVIDIA_H200`), `cpu` for a CPU, else the task's targets, else
/// the language's device.
fn target_hardware(device: Option<&str>, targets: &[String], language: Language) -> Vec<String> {
    match device {
        Some(d) if d.starts_with("CPU") => vec!["cpu".into()],
        Some(d) if d != "unknown device" && !d.trim().is_empty() => vec![d.trim().replace(' ', "_")],
        _ if !targets.is_empty() => targets.to_vec(),
        _ if !language.gpu_by_default() => vec!["cpu".into()],
        _ => vec!["cuda".into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_hardware_follows_the_device() {
        assert_eq!(
            target_hardware(Some("NVIDIA H200"), &[], Language::Cuda),
            ["NVIDIA_H200"]
        );
        assert_eq!(target_hardware(Some("CPU: AMD EPYC 7B13"), &[], Language::C), ["cpu"]);
        assert_eq!(target_hardware(None, &["cpu".to_string()], Language::Python), ["cpu"]);
        assert_eq!(target_hardware(Some("unknown device"), &[], Language::Triton), ["cuda"]);
    }
}
