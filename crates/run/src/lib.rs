//! How a ksearch run works: the loop that joins the run store, the search engine, the brains
//! (LLM clients, the knob tuner, replayed answers, or an external agent) and the executor that
//! evaluates candidates.
//!
//! - [`create`] makes a run directory: a snapshot of the task with its hash, the store with the
//!   run's settings and its `started` event.
//! - [`open`] opens a run directory again: the lock that makes its caller the run's one writer,
//!   the task from the snapshot (checked against its hash), the recorded settings.
//! - [`drive`] drives a run: replays its event log into the engine and serves the engine's
//!   requests until it finishes, waits for an agent or for evaluations, or is stopped.
//! - [`executor`] is where evaluations go: [`executor::Local`] evaluates on this machine's
//!   devices, [`executor::Deferred`] records candidates as pending for `ksearch evaluate` on
//!   another machine. A new way of running evaluations (a cluster) is a new executor.
//! - [`agent`] serves agent mode: the requests waiting for an external agent, and its answers.
//! - [`sync`] brings a copy of the run directory that was continued elsewhere back, when it
//!   extends this one (a fast-forward), and refuses diverged copies.
//!
//! The engine stays a pure state machine (`ksearch-search`); this crate is its I/O. The store
//! is written by one process at a time ([`lock`]), and every recorded step lands whole.

pub mod agent;
pub mod brains;
mod brief;
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
