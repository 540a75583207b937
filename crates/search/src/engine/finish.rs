//! The end of a run: the final re-measurement of the top candidates, then `Finished`.

use super::{Candidate, Engine, EngineError, Phase, Purpose, Request};

impl Engine {
    // --- the end -------------------------------------------------------------------------------

    pub(super) fn finalize(&mut self) -> Result<(), EngineError> {
        // Only a fatal failure finalizes with other requests still out: their answers would
        // come too late to matter, so they are dropped (an event answering one is refused).
        self.outstanding.clear();
        if let Some(cycle) = self.cycle.take() {
            // A cycle cut short by the budget still leaves its evidence in the tree.
            if let Some(best) = cycle.best {
                let solution = self.solution_ref(best);
                let _ = self.wm.attach_solution(&cycle.node_id, solution, self.round);
            }
            self.last_cycle = Some(cycle);
        }
        self.phase = Phase::Finalizing;
        let mut passing: Vec<&Candidate> = self.candidates.iter().filter(|c| c.passed()).collect();
        passing.sort_by(|a, b| {
            b.speedup()
                .partial_cmp(&a.speedup())
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.id.cmp(&b.id))
        });
        self.final_queue = passing
            .iter()
            .take(self.config.final_top_k)
            .map(|c| c.id)
            .rev()
            .collect();
        self.next_final()
    }

    /// Issues re-measurements up to `parallel` at once; finishes when none is left or out.
    pub(super) fn next_final(&mut self) -> Result<(), EngineError> {
        while self.outstanding.len() < self.parallel() {
            let Some(id) = self.final_queue.pop() else { break };
            self.request_evaluation(id, Purpose::Final);
        }
        if self.outstanding.is_empty() {
            self.finish_now();
        }
        Ok(())
    }

    /// Ranks by the final re-measurement (falling back to the search's numbers when no final
    /// measurement passed) and ends the run.
    pub(super) fn finish_now(&mut self) {
        let by_final = self
            .candidates
            .iter()
            .filter_map(|c| {
                c.final_result
                    .as_ref()
                    .filter(|r| r.passed())
                    .and_then(|r| r.speedup)
                    .map(|s| (c.id, s))
            })
            .fold(None, |best: Option<(i64, f64)>, (id, s)| match best {
                Some((_, bs)) if bs >= s => best,
                _ => Some((id, s)),
            });
        let best = by_final.map(|(id, _)| id).or_else(|| self.best().map(|c| c.id));
        let reason = self.stop_reason.clone().unwrap_or_else(|| {
            if self.round >= self.config.rounds {
                format!("the round budget ({}) is spent", self.config.rounds)
            } else {
                "the search ended".to_string()
            }
        });
        self.phase = Phase::Finished;
        self.outstanding.clear();
        self.final_queue.clear();
        self.finished = Some(Request::Finished {
            best_candidate: best,
            reason,
        });
    }
}
