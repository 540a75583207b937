//! Agent mode: an external coding agent (Claude Code, Codex, Cursor, ...) answers the planner's
//! and coder's requests with its own model. `next` shows the pending request; `submit` records
//! the answer, lets the engine go on (evaluations run here) and stops at the next request for
//! the agent. A run with `--parallel` above 1 (evolve) can wait on several requests at once:
//! `next` then lists them all, and `submit` answers any one of them by id.

use crate::run_cmd::{outcome, Outcome};
use anyhow::Context;
use ksearch_llm::LlmConfig;
use ksearch_run::agent::{pending_for_agent, request_json, requests_json, submit_answer};
use ksearch_run::answer_format;
use ksearch_run::drive::{drive, DriveOptions};
use ksearch_run::open::open_for;
use ksearch_store::RunStore;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `ksearch agent next` and `ksearch agent submit`.
#[derive(clap::Subcommand)]
pub(crate) enum AgentCommand {
    /// Print the request waiting for the agent: its id, role, prompt and expected answer (every
    /// one of them when several wait at once).
    Next {
        run_dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Answer a pending request with the text in FILE (`-` for standard input).
    Submit {
        run_dir: PathBuf,
        request_id: String,
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// Runs an agent subcommand: prints the waiting request(s), or records an answer and drives the
/// run to its next stop; returns the exit status.
pub(crate) fn run(command: &AgentCommand) -> anyhow::Result<u8> {
    match command {
        AgentCommand::Next {
            run_dir,
            json: json_out,
        } => {
            let store = RunStore::open(run_dir)?;
            let (engine, requests) = pending_for_agent(&store, run_dir)?;
            if *json_out {
                println!("{}", requests_json(&requests));
                return Ok(0);
            }
            if requests.len() > 1 {
                println!(
                    "{} requests wait for an answer; answer them in any order\n",
                    requests.len()
                );
            }
            for request in &requests {
                let body = request_json(request);
                // With one request, its round is the engine's; with several, each has its own.
                let id = request.id().unwrap_or("-");
                let round = engine.round_of(id).unwrap_or(engine.round());
                println!("request {id} for the {} (round {round})", request.role());
                println!("answer format: {}", answer_format(request));
                for m in body["messages"].as_array().into_iter().flatten() {
                    println!(
                        "\n----- {} -----\n{}",
                        m["role"].as_str().unwrap_or(""),
                        m["content"].as_str().unwrap_or("")
                    );
                }
                println!(
                    "\nanswer with: ksearch agent submit {} {id} ANSWER_FILE",
                    run_dir.display()
                );
            }
            Ok(0)
        }
        AgentCommand::Submit {
            run_dir,
            request_id,
            file,
            json,
        } => {
            let text = if file.as_os_str() == "-" {
                let mut t = String::new();
                std::io::stdin()
                    .read_to_string(&mut t)
                    .context("cannot read the answer from standard input")?;
                t
            } else {
                std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
            };
            let run = open_for(run_dir, "agent submit")?;
            let errors = submit_answer(&run.store, run_dir, request_id, text)?;
            let drove = drive(
                &run,
                &LlmConfig::default(),
                &DriveOptions {
                    quiet: *json,
                    ..Default::default()
                },
            )?;
            let mut out = outcome(run_dir, &drove);
            with_answer_errors(&mut out, request_id, &errors);
            if *json {
                println!("{}", out.json);
            } else {
                println!("{}", out.text);
            }
            Ok(out.exit)
        }
    }
}

/// Answers `request_id` with `text` and drives the run on to the next request, holding the
/// run's lock throughout (for the MCP server); progress goes to stderr unless `quiet`.
pub(crate) fn answer_and_continue(
    run_dir: &Path,
    request_id: &str,
    text: String,
    quiet: bool,
) -> anyhow::Result<Outcome> {
    let run = open_for(run_dir, "submit_answer (MCP)")?;
    let errors = submit_answer(&run.store, run_dir, request_id, text)?;
    let drove = drive(
        &run,
        &LlmConfig::default(),
        &DriveOptions {
            quiet,
            ..Default::default()
        },
    )?;
    let mut out = outcome(run_dir, &drove);
    with_answer_errors(&mut out, request_id, &errors);
    Ok(out)
}

/// A rejected answer: every error at once (JSON `answer_errors`), the text says so first, and
/// the exit status is 1 (the answer failed; the run goes on and asks again).
fn with_answer_errors(out: &mut Outcome, request_id: &str, errors: &[String]) {
    if errors.is_empty() {
        return;
    }
    out.json["answer_errors"] = serde_json::json!(errors);
    let list: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
    out.text = format!(
        "the answer to {request_id} was rejected ({} error(s); recorded, and the request is asked again with \
         this list):\n{}\n{}",
        errors.len(),
        list.join("\n"),
        out.text
    );
    if out.exit == 0 {
        out.exit = crate::EXIT_FAILED;
    }
}
