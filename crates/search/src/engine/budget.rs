//! Raising a run's round budget (`Event::BudgetRaised`, `ksearch resume --rounds`).
//!
//! A search that its budget ended stops in one of a few places, and each strategy records which
//! ([`ResumeAt`], set where the budget sends it to the final re-measurement). A raised budget
//! takes it back there: `refine` and `evolve` go on with the rounds the old budget did not allow,
//! exactly as a run given the larger budget at the start would; `world-model` goes on with the
//! planner's step after the cycle the budget cut short (or the cycle it was about to start), so
//! the planner sees that cycle's evidence before the next. The final re-measurement already
//! made stays on record; the new end makes its own, and only its finalists decide the winner
//! (finish.rs).

use super::{evolve, refine, Engine, EngineError, Phase, PlanKind};

/// Where a search stood when its round budget ended it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum ResumeAt {
    /// world-model: a cycle ended with the budget; the planner step that would have followed.
    Plan(PlanKind),
    /// world-model: the planner's step was applied, and the next cycle found the budget spent.
    StartCycle { may_propose: bool },
    /// refine: the next round.
    Refine,
    /// evolve: the next rounds, as many islands as `parallel` allows.
    Evolve,
}

impl Engine {
    /// `BudgetRaised`: a running search goes on to `rounds`; a finished one whose budget ended
    /// it goes on from where it stood. Refused, leaving the engine as it was, when `rounds` is
    /// not above the budget, while the final re-measurement is out, and for a run that ended
    /// for another reason than its budget.
    pub(super) fn raise_budget(&mut self, rounds: u32) -> Result<(), EngineError> {
        let refuse = |why: String| Err(EngineError::BudgetNotRaised(why));
        if rounds <= self.config.rounds {
            return refuse(format!(
                "the run's round budget is {} already; the new one must be above it",
                self.config.rounds
            ));
        }
        match self.phase {
            Phase::NotStarted => refuse("the run has not started".into()),
            Phase::Running => {
                self.config.rounds = rounds;
                Ok(())
            }
            Phase::Finalizing => refuse(
                "the run is in its final re-measurement (its budget was spent); raise the budget once that is done"
                    .into(),
            ),
            Phase::Finished => match (&self.stop_reason, self.resume_at.clone()) {
                (None, Some(at)) => {
                    self.config.rounds = rounds;
                    self.resume_at = None;
                    self.phase = Phase::Running;
                    self.finished = None;
                    self.final_queue.clear();
                    self.finalists.clear();
                    match at {
                        ResumeAt::Plan(kind) => self.request_plan(kind, None),
                        ResumeAt::StartCycle { may_propose } => self.start_cycle(may_propose),
                        ResumeAt::Refine => refine::resume(self),
                        ResumeAt::Evolve => evolve::resume(self),
                    }
                }
                (Some(reason), _) => refuse(format!(
                    "the run ended because {reason}, not by its round budget; more rounds would not go on from there"
                )),
                (None, None) => refuse("the run ended before its round budget was spent".into()),
            },
        }
    }
}
