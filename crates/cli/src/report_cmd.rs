//! `ksearch report RUN_DIR [--out FILE]`: one self-contained HTML page about a run (summary,
//! budget, every attempt on a chart, the world-model tree, the best kernel and its diff against
//! the seed, per-workload numbers, provenance). It needs no network and runs no script.

use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Where to write the page (default: RUN_DIR/report.html).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<u8> {
    let html = ksearch_report::report_html(&args.run_dir)?;
    let out = args.out.clone().unwrap_or_else(|| args.run_dir.join("report.html"));
    std::fs::write(&out, html).with_context(|| format!("cannot write {}", out.display()))?;
    println!("{}", out.display());
    Ok(0)
}
