//! The end of a run: the final re-measurement of the top candidates, then `Finished`.

use super::{Candidate, CompareRule, Engine, EngineError, EvalSummary, Phase, Purpose, Request};

impl Engine {
    // --- the end -------------------------------------------------------------------------------

    pub(super) fn finalize(&mut self) -> Result<(), EngineError> {
        // Only a fatal failure finalizes with search requests still out: their answers would
        // come too late to matter, so they are dropped (an event answering one is refused). A
        // re-measurement of the best stays out: it can still change the best, and so the top K
        // and the finalists' order, and the final re-measurement waits for it.
        self.outstanding
            .retain(|o| super::remeasure::is_remeasure_of(&o.request, None));
        if let Some(cycle) = self.cycle.take() {
            // A cycle cut short by the budget still leaves its evidence in the tree.
            if let Some(best) = cycle.best {
                let solution = self.solution_ref(best);
                let _ = self.wm.attach_solution(&cycle.node_id, solution, self.round);
            }
            self.last_cycle = Some(cycle);
        }
        self.phase = Phase::Finalizing;
        if !self
            .outstanding
            .iter()
            .any(|o| super::remeasure::is_remeasure_of(&o.request, None))
        {
            self.queue_finalists();
        }
        self.next_final()
    }

    /// The top K by the run's rule, best first (the queue pops from its end): taken once no
    /// re-measurement of a best is out, since one can change the ranking.
    pub(super) fn queue_finalists(&mut self) {
        self.final_queue = self
            .ranked()
            .iter()
            .take(self.config.final_top_k)
            .map(|c| c.id)
            .rev()
            .collect();
        self.finalists = self.final_queue.clone();
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
    /// measurement passed) and ends the run. Under the paired rule the finalists are taken in the
    /// search's order (its best first) and one replaces the one before it only when its final
    /// measurement beats that one's beyond the noise, so the re-measurement overturns the
    /// search's verdict only with evidence; under the legacy rule, the highest final speedup.
    pub(super) fn finish_now(&mut self) {
        let finalists: Vec<&Candidate> = match self.config.compare {
            CompareRule::Paired => self.ranked(),
            CompareRule::Speedup => self.candidates.iter().collect(),
        };
        // Final results of this end of the run only (an earlier end's stay on record).
        let finals = finalists
            .into_iter()
            .filter(|c| self.finalists.contains(&c.id))
            .filter_map(|c| c.final_result.as_ref().filter(|r| r.passed()).map(|r| (c.id, r)));
        let by_final = match self.config.compare {
            CompareRule::Paired => finals
                .fold(None, |best: Option<(i64, &EvalSummary)>, (id, r)| match best {
                    Some((_, b)) if !self.beats(r, Some(b)) => best,
                    _ => Some((id, r)),
                })
                .map(|(id, _)| id),
            CompareRule::Speedup => finals
                .filter_map(|(id, r)| r.speedup.map(|s| (id, s)))
                .fold(None, |best: Option<(i64, f64)>, (id, s)| match best {
                    Some((_, bs)) if bs >= s => best,
                    _ => Some((id, s)),
                })
                .map(|(id, _)| id),
        };
        let best = by_final.or_else(|| self.best().map(|c| c.id));
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
