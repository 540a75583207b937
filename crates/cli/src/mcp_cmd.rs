//! `ksearch mcp`: agent mode as MCP tools over stdio, so a coding agent (Claude Code, Codex,
//! Cursor, ...) can drive a search with its own model: start a run, read each planner or coder
//! request, answer it; ksearch runs the evaluations in between.
//!
//! Standard output is the JSON-RPC channel and nothing else may reach it: on Unix the server
//! keeps a private copy of it and points file descriptor 1 at standard error, so a stray print
//! or a child process that inherits stdout cannot corrupt the protocol. Progress goes to stderr.

use crate::agent_cmd::answer_and_continue;
use anyhow::{bail, Context};
use ksearch_llm::LlmConfig;
use ksearch_run::agent::{pending_for_agent, requests_json};
use ksearch_run::create::{create_run, NewRun, SearchSettings};
use ksearch_run::drive::{drive, DriveOptions};
use ksearch_run::executor::ExecutorKind;
use ksearch_run::BrainSpec;
use ksearch_spec::Task;
use ksearch_store::RunStore;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The arguments of `ksearch mcp` (none: the session is configured by its client).
#[derive(clap::Args)]
pub(crate) struct McpArgs {}

const INSTRUCTIONS: &str = "ksearch searches for fast kernels (C, CUDA, Triton, ...): every candidate is compiled, \
checked against a reference implementation and timed on this machine. In this server YOU are the model: ksearch \
plays the search algorithm and the evaluator, and asks you, one request at a time, to plan (the planner role) or \
to write a kernel (the coder role). Workflow: list_tasks (or use a task folder) -> start_search -> repeat \
{ next_request -> answer it following its `answer_format` and `messages` -> submit_answer } until a tool result \
has status `finished`; it names the best kernel's speedup and file. show_run displays the search tree at any time.";

const START_SEARCH: &str = "Start a kernel search that you drive. `task` is a built-in task name (see list_tasks) \
or the path of a task folder (definition.json, workloads.jsonl, task.toml). ksearch creates a run directory, \
evaluates the task's seed kernel if it has one, and stops at the first request for you. Returns JSON: run_dir \
(pass it to the other tools), status (`awaiting_agent`), request_id and role (`planner` or `coder`). Next: call \
next_request with the run_dir. Relative paths are resolved against the directory this server was started in.";

const NEXT_REQUEST: &str = "Read the request ksearch is waiting for in a run: JSON with id (the request_id to \
answer), role (`planner` or `coder`), kind, answer_format (what your answer must look like) and messages (the \
prompt: a system message and a user message; read both in full). Answer it yourself, as that role, with \
submit_answer. When several requests wait at once (a parallel run), `requests` lists every one in that form; \
answer each with its own submit_answer, in any order. Fails with an explanation when the run is finished or \
nothing is pending.";

const SUBMIT_ANSWER: &str = "Answer the pending request of a run with your text, exactly as the request's \
answer_format asks (the planner answers with one JSON edit script; the coder with the complete source of every \
kernel file, each in a fenced code block preceded by its file name). ksearch records the answer, then compiles, \
checks and times any kernel it produced (this can take a while) and goes on to the next request. Returns JSON: \
status `awaiting_agent` with the next request_id and role (call next_request again), or status `finished` with \
best_speedup (times faster than the reference), best_candidate and best_files (where the best kernel was \
written). An answer the engine rejects (no code in it, an edit script with errors) is recorded and \
`answer_errors` lists every error at once; the next request asks again. A wrong or stale request_id is refused \
and changes nothing.";

const SHOW_RUN: &str = "Show a run (finished or not) as JSON: its state, the round reached, the world model \
(the decision tree of ideas tried, with ratings and results), every candidate kernel with its status and \
speedup, the best candidate, and the budget used. Read-only; the same JSON as `ksearch show RUN_DIR --json`.";

const LIST_TASKS: &str = "List the built-in kernel tasks ksearch can search: name (pass it to start_search), \
op_type, language, targets, number of workloads (input shapes it is timed on) and a description.";

fn default_rounds() -> u32 {
    10
}

#[derive(Deserialize, schemars::JsonSchema)]
struct StartSearchArgs {
    /// A built-in task name (see list_tasks) or the path of a task folder.
    task: String,
    /// Coder rounds: how many kernels you will be asked to write (each one is evaluated).
    #[serde(default = "default_rounds")]
    #[schemars(range(min = 1))]
    rounds: u32,
    /// The run directory to create (default: runs/TASK-DATE-TIME under the server's directory).
    #[serde(default)]
    out: Option<String>,
    /// Seed of every evaluation's input generator (default: a fresh one, recorded in the run).
    #[serde(default)]
    seed: Option<u64>,
    /// Where candidates are evaluated: `local` (this machine, the default) or `deferred`
    /// (recorded as pending for `ksearch evaluate RUN_DIR`, e.g. on a GPU machine).
    #[serde(default)]
    executor: Option<String>,
    /// Requests served at once (default 1).
    #[serde(default)]
    parallel: Option<u32>,
    /// The model behind you, as the run should credit it (e.g. "claude-opus-4-5 via Claude Code").
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct RunDirArgs {
    /// The run directory start_search returned.
    run_dir: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SubmitAnswerArgs {
    /// The run directory start_search returned.
    run_dir: String,
    /// The id of the pending request (from next_request or the previous tool result), e.g. `r3`.
    request_id: String,
    /// Your complete answer, in the request's answer_format.
    answer: String,
}

#[derive(Clone)]
struct KsearchMcp {
    tool_router: ToolRouter<Self>,
    /// One tool call at a time: a run's log must not see two writers.
    busy: Arc<Mutex<()>>,
}

#[tool_router]
impl KsearchMcp {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
            busy: Arc::new(Mutex::new(())),
        }
    }

    #[tool(description = LIST_TASKS)]
    async fn list_tasks(&self) -> CallToolResult {
        self.blocking(list_tasks).await
    }

    #[tool(description = START_SEARCH)]
    async fn start_search(&self, Parameters(args): Parameters<StartSearchArgs>) -> CallToolResult {
        self.blocking(move || start_search(args)).await
    }

    #[tool(description = NEXT_REQUEST)]
    async fn next_request(&self, Parameters(args): Parameters<RunDirArgs>) -> CallToolResult {
        self.blocking(move || {
            let run_dir = Path::new(&args.run_dir);
            let (_, requests) = pending_for_agent(&RunStore::open(run_dir)?, run_dir)?;
            Ok(requests_json(&requests))
        })
        .await
    }

    #[tool(description = SUBMIT_ANSWER)]
    async fn submit_answer(&self, Parameters(args): Parameters<SubmitAnswerArgs>) -> CallToolResult {
        self.blocking(move || {
            let run_dir = Path::new(&args.run_dir);
            Ok(answer_and_continue(run_dir, &args.request_id, args.answer, false)?.json)
        })
        .await
    }

    #[tool(description = SHOW_RUN)]
    async fn show_run(&self, Parameters(args): Parameters<RunDirArgs>) -> CallToolResult {
        self.blocking(move || show_run(Path::new(&args.run_dir))).await
    }
}

impl KsearchMcp {
    /// Runs `work` on a blocking thread (it may evaluate kernels for minutes and starts its own
    /// async runtime), one call at a time; an error becomes a tool error the agent can read.
    async fn blocking<F>(&self, work: F) -> CallToolResult
    where
        F: FnOnce() -> anyhow::Result<serde_json::Value> + Send + 'static,
    {
        let busy = self.busy.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let _one_at_a_time = busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            work()
        })
        .await;
        let result = joined.unwrap_or_else(|e| Err(anyhow::anyhow!("the tool crashed: {e}")));
        match result {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(value.to_string())]),
            Err(err) => CallToolResult::error(vec![ContentBlock::text(format!("error: {err:#}"))]),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for KsearchMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ksearch", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

fn list_tasks() -> anyhow::Result<serde_json::Value> {
    crate::tasks_cmd::tasks_json()
}

fn start_search(args: StartSearchArgs) -> anyhow::Result<serde_json::Value> {
    if args.rounds == 0 {
        bail!("rounds must be at least 1");
    }
    let executor: ExecutorKind = match args.executor.as_deref() {
        Some(e) => e.parse().map_err(|e: String| anyhow::anyhow!("executor: {e}"))?,
        None => ExecutorKind::Local,
    };
    let parallel = args.parallel.unwrap_or(1);
    if !(1..=256).contains(&parallel) {
        bail!("parallel {parallel}: expected 1 to 256 requests at once");
    }
    let task = Task::load(&args.task)?;
    let brain = BrainSpec::Agent;
    let NewRun { run, run_seed } = create_run(
        &args.task,
        &task,
        &brain,
        SearchSettings {
            rounds: args.rounds,
            strategy: ksearch_search::engine::Strategy::WorldModel,
            knob_share: ksearch_search::engine::EngineConfig::default().knob_share,
            remeasure: ksearch_search::engine::EngineConfig::default().remeasure,
            context: ksearch_kb::ContextLevel::Full,
            parallel,
            devices: None,
            executor,
            ray: None,
            brain_note: args.model.clone(),
            profile: false,
        },
        args.out.map(PathBuf::from),
        args.seed,
    )?;
    // Absolute, so the agent can also hand it to `ksearch` commands run elsewhere.
    let run_dir = run.dir.canonicalize().unwrap_or(run.dir.clone());
    eprintln!(
        "ksearch mcp: searching {} for {} rounds in {} (seed {run_seed})",
        task.definition.name,
        args.rounds,
        run_dir.display()
    );
    let drove = drive(&run, &LlmConfig::default(), &DriveOptions::default())?;
    Ok(crate::run_cmd::outcome(&run_dir, &drove).json)
}

fn show_run(run_dir: &Path) -> anyhow::Result<serde_json::Value> {
    crate::show_cmd::show_json(run_dir)
}

/// The JSON-RPC channel's writer. On Unix: a copy of stdout, with fd 1 then pointed at stderr.
#[cfg(unix)]
fn protocol_output() -> anyhow::Result<tokio::fs::File> {
    use std::io::Write;
    use std::os::fd::AsFd;
    std::io::stdout().flush()?;
    // A close-on-exec duplicate: children never inherit the channel.
    let channel = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .context("cannot duplicate standard output")?;
    // SAFETY: dup2 on two descriptors this process owns; fd 1 stays open (now onto stderr).
    if unsafe { libc::dup2(2, 1) } < 0 {
        bail!(
            "cannot redirect standard output to standard error: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(tokio::fs::File::from_std(std::fs::File::from(channel)))
}

#[cfg(not(unix))]
fn protocol_output() -> anyhow::Result<tokio::io::Stdout> {
    Ok(tokio::io::stdout())
}

/// Serves MCP on standard input and output until the client closes the session; returns the
/// exit status.
pub(crate) fn run(_args: &McpArgs) -> anyhow::Result<u8> {
    let output = protocol_output()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = rt.block_on(async move {
        eprintln!("ksearch mcp: serving MCP on standard input and output");
        let service = KsearchMcp::new()
            .serve((tokio::io::stdin(), output))
            .await
            .context("the MCP session did not start")?;
        service.waiting().await.context("the MCP session failed")?;
        anyhow::Ok(())
    });
    // The client has gone: a step still in flight is abandoned (the run resumes from its log).
    rt.shutdown_background();
    result.map(|()| 0)
}
