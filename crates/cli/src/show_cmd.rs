//! `ksearch show RUN_DIR`: the tree, the best candidate and the budget used, rebuilt from the
//! run's event log (nothing is re-run).

use crate::run_cmd::load_events;
use anyhow::Context;
use ksearch_search::engine::{verdict, Engine, Request};
use ksearch_store::RunStore;
use serde_json::json;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct ShowArgs {
    /// The run directory `ksearch run` printed.
    run_dir: PathBuf,
    /// Print one JSON object (world model, candidates, budget) instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &ShowArgs) -> anyhow::Result<u8> {
    let store = RunStore::open(&args.run_dir)?;
    let engine = Engine::replay(&load_events(&store)?).context("the run's event log does not replay")?;
    let exchanges = store.exchanges()?;
    let calls = exchanges.iter().filter(|x| x.answer.is_some()).count();
    let failed_calls = exchanges.len() - calls;
    let tokens_in: u64 = exchanges.iter().map(|x| x.input_tokens).sum();
    let tokens_out: u64 = exchanges.iter().map(|x| x.output_tokens).sum();
    let dollars: f64 = exchanges.iter().filter_map(|x| x.cost_dollars).sum();
    let unpriced = exchanges
        .iter()
        .filter(|x| x.answer.is_some() && x.cost_dollars.is_none())
        .count();
    let evaluations = store.evaluations()?.len();
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
    let task = engine.task().map(|t| t.name.clone()).unwrap_or_default();
    if args.json {
        let candidates: Vec<_> = engine
            .candidates()
            .iter()
            .map(|c| {
                json!({
                    "id": c.id, "parent": c.parent, "node_id": c.node_id, "round": c.round, "cycle": c.cycle,
                    "status": c.result.as_ref().map(|r| r.status.clone()), "speedup": c.speedup(),
                    "final_speedup": c.final_result.as_ref().and_then(|r| r.speedup),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "run_dir": args.run_dir, "task": task, "state": state, "round": engine.round(),
                "rounds": engine.config().rounds, "best_candidate": best,
                "world_model": engine.world_model().to_json(), "candidates": candidates,
                "budget": {"llm_calls": calls, "failed_llm_calls": failed_calls, "input_tokens": tokens_in,
                           "output_tokens": tokens_out, "dollars": dollars, "unpriced_calls": unpriced,
                           "evaluations": evaluations},
            })
        );
        return Ok(0);
    }
    println!("run {}  task {task}  {state}", args.run_dir.display());
    println!(
        "rounds {}/{}, cycles {}, candidates {}",
        engine.round(),
        engine.config().rounds,
        engine.cycle_count(),
        engine.candidates().len()
    );
    println!();
    println!("{}", engine.world_model().render_compact(500, 100_000).trim_end());
    println!();
    match best.and_then(|id| engine.candidate(id)) {
        Some(b) => {
            let result = b
                .final_result
                .as_ref()
                .or(b.result.as_ref())
                .map(verdict)
                .unwrap_or_default();
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
        }
        None => println!("best: none passed yet"),
    }
    let priced = if unpriced > 0 {
        format!(" (+{unpriced} calls of unknown price)")
    } else {
        String::new()
    };
    println!(
        "budget used: {calls} LLM calls ({failed_calls} failed), {tokens_in} tokens in, {tokens_out} out, ${dollars:.4}{priced}; {evaluations} evaluations"
    );
    Ok(0)
}
