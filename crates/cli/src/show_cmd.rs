//! `ksearch show RUN_DIR`: the tree, the best candidate and the budget used, rebuilt from the
//! run's event log (nothing is re-run).

use crate::run_cmd::load_events;
use anyhow::Context;
use ksearch_search::engine::{resource_lines, verdict, Engine, Request};
use ksearch_store::RunStore;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub(crate) struct ShowArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Print one JSON object (world model, candidates, budget) instead of text.
    #[arg(long)]
    json: bool,
}

/// What `show` reports, computed once for the text and the JSON forms.
struct RunView {
    engine: Engine,
    state: String,
    best: Option<i64>,
    budget: Budget,
}

struct Budget {
    calls: usize,
    failed_calls: usize,
    tokens_in: u64,
    tokens_out: u64,
    dollars: f64,
    unpriced: usize,
    evaluations: usize,
}

fn view(run_dir: &Path) -> anyhow::Result<RunView> {
    let store = RunStore::open(run_dir)?;
    let engine = Engine::replay(&load_events(&store)?).context("the run's event log does not replay")?;
    // The tuner's and an agent's answers are recorded too, but they are not LLM calls of ours.
    let exchanges: Vec<_> = store
        .exchanges()?
        .into_iter()
        .filter(|x| x.provider != "tuner" && x.provider != "agent")
        .collect();
    let calls = exchanges.iter().filter(|x| x.answer.is_some()).count();
    let budget = Budget {
        calls,
        failed_calls: exchanges.len() - calls,
        tokens_in: exchanges.iter().map(|x| x.input_tokens).sum(),
        tokens_out: exchanges.iter().map(|x| x.output_tokens).sum(),
        dollars: exchanges.iter().filter_map(|x| x.cost_dollars).sum(),
        unpriced: exchanges
            .iter()
            .filter(|x| x.answer.is_some() && x.cost_dollars.is_none())
            .count(),
        evaluations: store.evaluations()?.len(),
    };
    let (state, best) = match engine.pending() {
        Some(Request::Finished { best_candidate, reason }) => (format!("finished: {reason}"), *best_candidate),
        Some(r) => (
            format!(
                "in progress, waiting on the {} (resume with `ksearch resume`)",
                r.role()
            ),
            engine.best().map(|b| b.id),
        ),
        None => ("not started".to_string(), None),
    };
    Ok(RunView {
        engine,
        state,
        best,
        budget,
    })
}

/// The run as JSON: `ksearch show --json`, and the MCP server's `show_run`.
pub(crate) fn show_json(run_dir: &Path) -> anyhow::Result<serde_json::Value> {
    let v = view(run_dir)?;
    let e = &v.engine;
    let candidates: Vec<_> = e
        .candidates()
        .iter()
        .map(|c| {
            json!({
                "id": c.id, "parent": c.parent, "node_id": c.node_id, "round": c.round, "cycle": c.cycle,
                "status": c.result.as_ref().map(|r| r.status.clone()), "speedup": c.speedup(),
                "final_speedup": c.final_result.as_ref().and_then(|r| r.speedup),
                "resources": c.result.as_ref().map(|r| r.resources.clone()).unwrap_or_default(),
            })
        })
        .collect();
    let b = &v.budget;
    Ok(json!({
        "run_dir": run_dir, "task": e.task().map(|t| t.name.clone()), "state": v.state, "round": e.round(),
        "rounds": e.config().rounds, "best_candidate": v.best,
        "world_model": e.world_model().to_json(), "candidates": candidates,
        "budget": {"llm_calls": b.calls, "failed_llm_calls": b.failed_calls, "input_tokens": b.tokens_in,
                   "output_tokens": b.tokens_out, "dollars": b.dollars, "unpriced_calls": b.unpriced,
                   "evaluations": b.evaluations},
    }))
}

pub(crate) fn run(args: &ShowArgs) -> anyhow::Result<u8> {
    if args.json {
        println!("{}", show_json(&args.run_dir)?);
        return Ok(0);
    }
    let v = view(&args.run_dir)?;
    let e = &v.engine;
    let task = e.task().map(|t| t.name.clone()).unwrap_or_default();
    println!("run {}  task {task}  {}", args.run_dir.display(), v.state);
    println!(
        "rounds {}/{}, cycles {}, candidates {}",
        e.round(),
        e.config().rounds,
        e.cycle_count(),
        e.candidates().len()
    );
    println!();
    println!("{}", e.world_model().render_compact(500, 100_000).trim_end());
    println!();
    match v.best.and_then(|id| e.candidate(id)) {
        Some(b) => {
            let summary = b.final_result.as_ref().or(b.result.as_ref());
            let result = summary.map(verdict).unwrap_or_default();
            let files: Vec<&str> = b.sources.iter().map(|s| s.path.as_str()).collect();
            println!(
                "best: candidate {} (node {}, round {}): {result}",
                b.id, b.node_id, b.round
            );
            println!(
                "      files {} (in {}/best/ once the run finishes)",
                files.join(", "),
                args.run_dir.display()
            );
            for line in summary
                .map(|s| resource_lines(&s.resources))
                .unwrap_or_default()
                .lines()
            {
                println!("      {line}");
            }
        }
        None => println!("best: none passed yet"),
    }
    let b = &v.budget;
    let priced = if b.unpriced > 0 {
        format!(" (+{} calls of unknown price)", b.unpriced)
    } else {
        String::new()
    };
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let llm = if b.calls == 0 && b.failed_calls == 0 {
        "no LLM calls".to_string()
    } else {
        // `+ 0.0` turns a sum of no prices (-0.0) into 0.
        format!(
            "{} ({} failed), {} tokens in, {} out, ${:.4}{priced}",
            plural(b.calls as u64, "LLM call", "LLM calls"),
            b.failed_calls,
            b.tokens_in,
            b.tokens_out,
            b.dollars + 0.0
        )
    };
    println!(
        "budget used: {llm}; {}",
        plural(b.evaluations as u64, "evaluation", "evaluations")
    );
    Ok(0)
}
