//! Driving a ksearch run: the I/O around the search engine. The engine (`ksearch-search`) is a
//! pure state machine that emits requests (plan, code, evaluate) and consumes events; this
//! crate is the driver that serves those requests with the brains and an executor, appends
//! every answering event to the run's store *before* the engine sees it, and keeps the run
//! directory that makes a run resumable, replayable and movable between machines
//! (docs/engine.md, docs/evaluations.md).
//!
//! What it holds, by module:
//! - the run directory: [`create`] makes one (the task's [`snapshot`] with its hash, the store
//!   with the run's settings and its `started` event); [`open`] opens one again (the
//!   snapshot checked against its hash, the recorded brain and executor); [`lock`] makes the
//!   caller the run's one writer; [`sync`] takes back a copy continued elsewhere when it
//!   extends this run (a fast-forward) and refuses diverged copies.
//! - [`budget`]: `resume --rounds`, a run's round budget raised through the engine's event.
//! - the driver loop: [`drive`] replays the event log into the engine, builds the brains and
//!   the executor, and serves requests, up to the engine's `parallel` at once on worker
//!   threads, until the run finishes, waits for an agent or for evaluations, or is stopped
//!   ([`Stopped`]); a finished run gets its best kernel in `RUN_DIR/best/` and its report
//!   (`ksearch-report`). The log's order is the completion order, so a crash loses at most
//!   the requests in flight, which `resume` serves again.
//! - the brains ([`brains`]): LLM clients for the planner and coder roles (`ksearch-llm`, with
//!   one budget that a resumed run keeps), answers replayed from a recorded run, the knob tuner
//!   (no LLM), or an external agent, served by [`agent`] (the requests waiting for it, and its
//!   answers). [`BrainSpec`] is what the run records, so `resume` rebuilds the same brains.
//! - the executors ([`executor`]): every evaluation goes through one. [`executor::Local`]
//!   evaluates on this machine's devices, leased from a `ksearch-devices` pool (one evaluation
//!   per device at a time, each narrowed to its GPU: [`placement`]); [`executor::Deferred`]
//!   leaves candidates pending for `ksearch evaluate` on another machine; [`executor::ray::Ray`]
//!   ships each evaluation to a node of a Ray cluster (docs/ray.md). An executor that goes away
//!   stops the run with its evaluations left pending, never recorded as the candidate's fault.
//! - what the brains are told: [`knowledge`] (the task's target device, what its prompts cite
//!   from the knowledge base at a context level, this machine's CPU for C tasks, the tuner's
//!   priors) and [`contract`] (each backend's calling convention, build, arithmetic and timing)
//!   go into the task brief the engine renders its prompts from; [`summary`] turns an
//!   evaluation record into the summary the engine keeps and the prompts show.
//!
//! Entry points: [`create::create_run`] then [`drive::drive`] for `ksearch run`;
//! [`open::open_for`] then [`drive::drive`] for `resume` and `evaluate`
//! ([`drive::DriveOptions`]); [`agent::pending_for_agent`] and [`agent::submit_answer`] for
//! agent mode; [`sync::fast_forward`] for `sync`; [`RunError`] for the failures a caller tells
//! apart (the rest is `anyhow::Error` with context).
//!
//! This crate joins the others: it reads tasks through ksearch-spec, evaluates through
//! ksearch-eval, keeps everything in ksearch-store (one writer, every step recorded whole),
//! cites ksearch-kb, and writes ksearch-report's report; ksearch-cli (the commands and MCP) is
//! its caller. It decides nothing about the search itself: that is the engine's.

#![warn(missing_docs)]

pub mod agent;
pub mod brains;
mod brief;
pub mod budget;
pub mod contract;
pub mod create;
pub mod drive;
mod driver;
pub mod error;
pub mod executor;
pub mod knowledge;
pub mod lock;
pub mod open;
pub mod snapshot;
pub mod summary;
pub mod sync;

pub use brains::{BrainSpec, Brains};
pub use driver::{answer_format, candidate_solution, placement, Stopped};
pub use error::RunError;

/// A fresh seed for an evaluation's input generator, when the user gives none.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Mix in the pid so two evaluations started in the same instant still differ.
    ((nanos as u64) ^ ((std::process::id() as u64) << 32)) % 1_000_000_007
}
