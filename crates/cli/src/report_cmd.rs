//! `ksearch report RUN_DIR [--out FILE]`: one self-contained HTML page about a run (summary,
//! budget, every attempt on a chart, the world-model tree, the best kernel and its diff against
//! the seed, per-workload numbers, provenance). It needs no network and runs no script.

use anyhow::Context;
use std::path::PathBuf;

/// The arguments of `ksearch report`.
#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Where to write the page (default: RUN_DIR/report.html).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Writes the run's HTML report and prints its path; returns the exit status.
pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    let html = ksearch_report::report_html(&args.run_dir)?;
    let out = args.out.clone().unwrap_or_else(|| args.run_dir.join("report.html"));
    write_whole(&out, html.as_bytes())?;
    println!("{}", out.display());
    Ok(0)
}

/// Writes `bytes` to `path` whole or not at all: through a temporary file beside it, renamed
/// over it once complete (a full disk leaves the old page, or none, never a truncated one).
fn write_whole(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}
