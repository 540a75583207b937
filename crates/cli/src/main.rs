//! `ksearch`: finds fast kernels. This binary is the command line and nothing more.
//!
//! What it owns: parsing the arguments (clap, one module per command: `run_cmd` for `run`,
//! `resume`, `evaluate` and `sync`, `show_cmd`, `eval_cmd`, `agent_cmd`, `mcp_cmd` for the MCP
//! server's tools, ...) and printing the outcome — the text for people, the one JSON object of
//! `--json` for scripts and MCP clients, and the exit status (0, [`EXIT_FAILED`],
//! [`EXIT_BAD_INPUT`]; an error is printed as `error: ...`, and as JSON too when `--json` was
//! asked).
//!
//! What it must not do: hold logic. How a run works is `ksearch-run`'s (the driver, brains,
//! executors, the run directory), the search `ksearch-search`'s, evaluation `ksearch-eval`'s,
//! tasks `ksearch-spec`'s, the run store and its metadata contract `ksearch-store`'s, reports
//! `ksearch-report`'s, the knowledge base `ksearch-kb`'s. A command reads those crates' results
//! and words them; a decision a second front end (the MCP server, a test, another tool) would
//! also need belongs in a library crate, not here.

#![warn(missing_docs)]

mod agent_cmd;
mod dashboard_cmd;
mod doctor_cmd;
mod eval_cmd;
mod exit;
mod export_cmd;
mod fib_trace;
mod format;
mod import_cmd;
mod kb_cmd;
mod mcp_cmd;
mod report_cmd;
mod run_cmd;
mod show_cmd;
mod sweep_cmd;
mod tasks_cmd;

// The knowledge base as the run crate loads it (kb, doctor, sweep and eval commands).
pub(crate) use ksearch_run::knowledge;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ksearch",
    version,
    about = "Search for fast GPU and CPU kernels, checked and timed on real hardware"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in tasks.
    Tasks {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Evaluate one solution: compile, check against the reference, time against it.
    Eval(eval_cmd::EvalArgs),
    /// Search for a fast kernel; prints the run directory.
    Run(run_cmd::RunArgs),
    /// Continue a run that was stopped or crashed.
    Resume(run_cmd::ResumeArgs),
    /// Evaluate a run's pending candidates on this machine (a run made with `--executor
    /// deferred`, or a copy of one), and let an in-process brain go on from their results.
    Evaluate(run_cmd::EvaluateArgs),
    /// Bring back a copy of a run continued elsewhere, when it extends this run.
    Sync(run_cmd::SyncArgs),
    /// Show a run: the world-model tree, the best candidate, the budget used.
    Show(show_cmd::ShowArgs),
    /// Write a run's best candidate as a FlashInfer-Bench Solution JSON.
    Export(export_cmd::ExportArgs),
    /// Write a run's report: one self-contained HTML page (charts, the tree, the best kernel).
    Report(report_cmd::ReportArgs),
    /// Serve a live view of runs in progress, several side by side (a local web page).
    Dashboard(dashboard_cmd::DashboardArgs),
    /// Evaluate a task template's knob assignments without searching: the whole grid, or a
    /// random sample.
    Sweep(sweep_cmd::SweepArgs),
    /// The knowledge base: hardware figures and optimisation patterns per target.
    #[command(subcommand)]
    Kb(kb_cmd::KbCommand),
    /// Report compilers, Python and its packages, GPUs and configured LLMs.
    Doctor,
    /// Agent mode: read the pending request of a run, or answer it.
    #[command(subcommand)]
    Agent(agent_cmd::AgentCommand),
    /// Agent mode as MCP tools over stdio, for coding agents (Claude Code, Codex, Cursor, ...).
    Mcp(mcp_cmd::McpArgs),
    /// Turn a KernelBench problem or a GPU MODE task into a ksearch task folder.
    #[command(subcommand)]
    Import(import_cmd::ImportCommand),
}

// Exit codes of the command-line contract: see [`exit::ExitStatus`].
/// Exit status 0: done as asked.
pub(crate) const EXIT_SUCCESS: u8 = exit::ExitStatus::Success as u8;
/// Exit status 1: the input was right but the command failed (a solution that does not pass, a
/// run that stopped short, another process holding the run, a missing device, a full disk).
pub(crate) const EXIT_FAILED: u8 = exit::ExitStatus::Failed as u8;
/// Exit status 2: bad input (an unknown task, an unreadable file, a directory that is not a
/// run), and any failure not known to be the machine's or the moment's.
pub(crate) const EXIT_BAD_INPUT: u8 = exit::ExitStatus::BadInput as u8;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json_asked = std::env::args_os().skip(1).any(|a| a == "--json");
    // `ksearch show RUN | head` (or `agent next RUN | head`) must end quietly when the reader goes away, as other Unix tools
    // do, instead of panicking on the broken pipe: the commands that only print get the default
    // action of SIGPIPE back (Rust's runtime ignores it). Commands that write to child processes
    // (eval, run: the harness's stdin) keep ignoring it, so a dead child is an error they report,
    // not a signal that kills ksearch.
    #[cfg(unix)]
    if matches!(
        cli.command,
        Command::Tasks { .. }
            | Command::Show(_)
            | Command::Kb(_)
            | Command::Agent(agent_cmd::AgentCommand::Next { .. })
    ) {
        // SAFETY: no thread exists yet; SIG_DFL is a valid action for SIGPIPE.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.command {
        Command::Tasks { json } => tasks_cmd::run(json),
        Command::Eval(args) => eval_cmd::run(&args),
        Command::Run(args) => run_cmd::run(&args),
        Command::Resume(args) => run_cmd::resume(&args),
        Command::Evaluate(args) => run_cmd::evaluate(&args),
        Command::Sync(args) => run_cmd::sync(&args),
        Command::Show(args) => show_cmd::run(&args),
        Command::Export(args) => export_cmd::run(&args),
        Command::Report(args) => report_cmd::run(&args),
        Command::Dashboard(args) => dashboard_cmd::run(&args),
        Command::Agent(command) => agent_cmd::run(&command),
        Command::Sweep(args) => sweep_cmd::run(&args),
        Command::Kb(command) => kb_cmd::run(&command),
        Command::Doctor => doctor_cmd::run(),
        Command::Mcp(args) => mcp_cmd::run(&args),
        Command::Import(command) => import_cmd::run(&command),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            let code = exit::ExitStatus::of_error(&err).code();
            // A script that asked for JSON gets JSON on stdout for a failure too.
            if json_asked {
                println!(
                    "{}",
                    serde_json::json!({"status": "error", "exit": code, "error": format!("{err:#}")})
                );
            }
            ExitCode::from(code)
        }
    }
}
