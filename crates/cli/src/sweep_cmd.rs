//! `ksearch sweep TASK --grid | --random N`: evaluates knob assignments of a task's template
//! without any search — the exhaustive grid or a seeded random sample. It is the baseline the
//! knob tuner is measured against (bench/tuner.sh), and a way to map a small design space.

use anyhow::{bail, Context};
use ksearch_eval::{evaluate, EvalOptions};
use ksearch_run::summary::summarize;
use ksearch_spec::{Assignment, Solution, Task};
use serde_json::json;

/// The arguments of `ksearch sweep`.
#[derive(clap::Args)]
pub(crate) struct SweepArgs {
    /// A built-in task name or a task folder; the task must have a kernel template.
    task: String,
    /// Evaluate every valid assignment.
    #[arg(long, conflicts_with = "random")]
    grid: bool,
    /// Evaluate N valid assignments drawn at random (without repetition).
    #[arg(long, value_name = "N")]
    random: Option<usize>,
    /// Seed of the random draw and of the evaluations' inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a line per evaluation.
    #[arg(long)]
    json: bool,
}

/// Largest grid we agree to enumerate.
const MAX_ASSIGNMENTS: usize = 100_000;

/// Evaluates the chosen assignments one by one and prints each result and the best so far;
/// returns the exit status (1 when no assignment passed).
pub(crate) fn run(args: &SweepArgs) -> anyhow::Result<u8> {
    let task = Task::load(&args.task)?;
    let tuner = crate::knowledge::tuner(&task)?;
    let template = task.template.as_ref().context("the task has no kernel template")?;
    let kb = crate::knowledge::kb()?;
    let hw = crate::knowledge::task_figures(&kb, &task)?;
    let valid = template.space.enumerate_valid(&hw, MAX_ASSIGNMENTS);
    let chosen: Vec<Assignment> = match (args.grid, args.random) {
        (true, None) => valid,
        (false, Some(n)) => {
            let mut pool = valid;
            let mut state = args.seed ^ 0x9E37_79B9_7F4A_7C15;
            let mut out = Vec::new();
            while out.len() < n && !pool.is_empty() {
                let i = (splitmix64(&mut state) % pool.len() as u64) as usize;
                out.push(pool.swap_remove(i));
            }
            out
        }
        _ => bail!("choose --grid or --random N"),
    };
    if !args.json {
        eprintln!("sweeping {} assignments of {}", chosen.len(), task.definition.name);
    }
    let entry = task.config.kernel.entry.clone().unwrap_or_else(|| "kernel".into());
    let mut rows = Vec::new();
    let mut best: Option<f64> = None;
    for (i, a) in chosen.iter().enumerate() {
        let source = tuner.render(a).map_err(anyhow::Error::msg)?;
        let solution = Solution::from_source(tuner.file(), tuner.file(), source, &task)
            .with_context(|| format!("the rendered template for {}", describe(a)))?;
        debug_assert!(solution.spec.entry_point.ends_with(&entry));
        let mut opts = EvalOptions::new(args.seed.wrapping_add(i as u64));
        opts.fail_fast = true;
        let evaluation = evaluate(&task, &solution, &opts, &|m| eprintln!("ksearch: {m}"))?;
        let summary = summarize(&evaluation);
        let speedup = summary.speedup.filter(|_| summary.passed());
        if let Some(s) = speedup {
            best = Some(best.map_or(s, |b: f64| b.max(s)));
        }
        // A status of `passed` whose timing was flagged does not count; say which, and why an
        // assignment did not pass, so that a sweep where none counts is not a bare exit 1.
        let verdict = match (&speedup, &summary.suspicious) {
            (Some(s), _) => format!("{s:.3}x"),
            (None, Some(_)) if summary.status == "passed" => "suspicious timing".to_string(),
            (None, _) => summary.status.clone(),
        };
        let why = summary.suspicious.clone().or_else(|| summary.reason.clone());
        if !args.json {
            println!(
                "{:>5}  {:<60}  {:<22}  best {}",
                i + 1,
                describe(a),
                verdict,
                best.map(|b| format!("{b:.3}x")).unwrap_or_else(|| "-".into())
            );
            if speedup.is_none() {
                eprintln!(
                    "  evaluation {}: {verdict}: {}",
                    i + 1,
                    why.as_deref().unwrap_or("no reason given")
                );
            }
        }
        rows.push(json!({
            "evaluation": i + 1, "assignment": a, "status": summary.status, "speedup": speedup,
            "suspicious": summary.suspicious, "reason": summary.reason, "best": best,
        }));
    }
    if args.json {
        let mode = if args.grid { "grid" } else { "random" };
        println!(
            "{}",
            json!({"task": task.definition.name, "mode": mode, "evaluations": rows, "best_speedup": best})
        );
    }
    Ok(if best.is_some() { 0 } else { crate::EXIT_FAILED })
}

fn describe(a: &Assignment) -> String {
    a.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

/// A small, well-mixed PRNG step (splitmix64), so a seed gives the same sample everywhere.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
