//! `ksearch resume --rounds N`: raising a run's round budget. The engine decides whether it can
//! take the raise (a running run, or one its budget ended: docs/engine.md, "Raising the round
//! budget"); only an event it accepts enters the log, so a refused raise leaves the run as it was.

use crate::open::OpenRun;
use anyhow::Context;
use ksearch_search::engine::{Engine, Event};

/// What a raise did: the budget before and after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    /// The round budget the run had.
    pub from: u32,
    /// The round budget it has now.
    pub to: u32,
}

/// Raises the round budget of `run` (opened for writing) to `rounds`: the `budget_raised` event
/// is applied to the replayed engine first and appended only when the engine takes it. The
/// driver then goes on from it (`drive::drive`), like any resume.
pub fn raise_budget(run: &OpenRun, rounds: u32) -> anyhow::Result<Raised> {
    let events = crate::drive::load_events(&run.store)?;
    let mut engine = Engine::replay(&events).context("the run's event log does not replay")?;
    let from = engine.config().rounds;
    let event = Event::BudgetRaised { rounds };
    engine.apply(&event)?;
    run.store
        .append_event(event.kind(), &serde_json::to_value(&event)?)
        .context("recording the raised budget")?;
    Ok(Raised { from, to: rounds })
}
