//! Re-measuring a noisy best (docs/engine.md, "Re-measuring a noisy best").
//!
//! Under the paired rule a candidate displaces the run's best only when it is faster beyond the
//! larger noise of the two. One noisy measurement of the best (a workload whose IQR is several
//! times its median: a stalled device, a first call that paid a compile) then blocks every later
//! candidate, however much faster it reads: a recorded MLX run kept its second candidate, noise
//! 458%, against nine successors that read 1.26-1.66x faster. When a candidate reads faster than
//! the best beyond its own noise, so that only the best's noise holds it back, the engine asks
//! for the best to be measured again (`Evaluate(remeasure)`), at most `EngineConfig::remeasure`
//! times per candidate and one at a time. A re-measurement that passes with less noise becomes
//! the measurement the engine decides with; the candidates held back since the best became best
//! are then compared with it again, in the order they were measured, as if they had been measured
//! after it.
//!
//! A candidate measured by another version of the harness than the best (a run resumed with a
//! newer ksearch) is not compared with it at all: the best is measured again by that version
//! first, whatever the setting (once per version), and the re-measurement replaces the old
//! measurement if it passes. Logs recorded before the harness version was in the summaries
//! have none on either side, so they replay as they were made.
//!
//! The request is served beside the search's own (it is not a round and draws no coder answer);
//! the final re-measurement waits for those that are out before it takes its finalists.

use super::compare::own_noise;
use super::{Engine, EngineError, EvalSummary, Phase, Purpose, Request};

impl Engine {
    /// Candidate `challenger` read faster than the run's best but within the best's noise alone:
    /// it waits for a re-measurement of the best, which is asked for unless one is out or the
    /// best has had its share.
    /// `other_harness`: the challenger was measured by another harness version than the best,
    /// which is then measured again whatever `EngineConfig::remeasure` allows.
    pub(super) fn challenge_best(&mut self, challenger: i64, other_harness: bool) {
        let Some(best) = self.best else { return };
        self.challengers.push(challenger);
        let taken = self.candidate(best).map_or(0, |c| c.remeasured.len());
        let allowed = other_harness || taken < self.config.remeasure as usize;
        if self.phase == Phase::Running && allowed && !self.remeasuring(best) {
            self.request_evaluation(best, Purpose::Remeasure);
        }
    }

    /// Whether `summary` cannot be compared with candidate `best`'s measurement before `best`
    /// is measured again: both passed, by different harness versions, and no re-measurement of
    /// `best` by `summary`'s version has been taken (one that did not pass leaves the old
    /// measurement to compare with, rather than asking again and again).
    pub(super) fn needs_harness_remeasure(&self, best: i64, summary: &EvalSummary) -> bool {
        let Some(c) = self.candidate(best) else { return false };
        let Some(current) = c.result.as_ref() else { return false };
        summary.passed()
            && current.passed()
            && current.harness != summary.harness
            && !c.remeasured.iter().any(|r| r.harness == summary.harness)
    }

    /// Whether a re-measurement of `candidate` is outstanding.
    pub(super) fn remeasuring(&self, candidate: i64) -> bool {
        self.outstanding
            .iter()
            .any(|o| is_remeasure_of(&o.request, Some(candidate)))
    }

    /// The re-measurement of the candidate at `index` is in.
    pub(super) fn on_remeasured(&mut self, index: usize, summary: &EvalSummary) -> Result<(), EngineError> {
        let candidate = &mut self.candidates[index];
        let id = candidate.id;
        candidate.remeasured.push(summary.clone());
        // A passing re-measurement replaces a measurement by another harness version, or one
        // noisier than itself.
        let better = summary.passed()
            && match candidate.result.as_ref().filter(|r| r.passed()) {
                Some(r) if r.harness != summary.harness => true,
                Some(r) => own_noise(summary).unwrap_or(f64::INFINITY) < own_noise(r).unwrap_or(f64::INFINITY),
                None => false,
            };
        if better {
            // The search evaluation stays in view; a later re-measurement replaces only another.
            let replaced = candidate.result.replace(summary.clone());
            if candidate.superseded.is_none() {
                candidate.superseded = replaced;
            }
            if self.best == Some(id) {
                self.settle_challengers();
            }
        }
        if self.phase == Phase::Finalizing {
            // The search is over and waited for this: the finalists are taken once none is out.
            if !self.outstanding.iter().any(|o| is_remeasure_of(&o.request, None)) {
                self.queue_finalists();
            }
            return self.next_final();
        }
        Ok(())
    }

    /// The best has a new measurement: the challengers held back by the old one are compared with
    /// it in the order they were measured, each replacing the best it beats.
    fn settle_challengers(&mut self) {
        let challengers = std::mem::take(&mut self.challengers);
        let result = |e: &Engine, id: i64| e.candidate(id).and_then(|c| c.result.clone());
        let mut best = self.best;
        for c in challengers {
            let (Some(mine), incumbent) = (result(self, c), best.and_then(|b| result(self, b))) else {
                continue;
            };
            // Only times of the same harness version are compared (a challenger measured by an
            // older one than the best's new measurement stays out).
            if incumbent.as_ref().is_some_and(|b| b.harness != mine.harness) {
                continue;
            }
            if self.beats(&mine, incumbent.as_ref()) {
                best = Some(c);
            }
        }
        if best == self.best {
            return;
        }
        self.best = best;
        // The code the prompts show as the best is the run's best: a challenger of the cycle
        // under way becomes that cycle's best too.
        let cycle_count = self.cycle_count;
        let of_this_cycle = best
            .and_then(|b| self.candidate(b))
            .is_some_and(|c| c.cycle == cycle_count);
        if let (true, Some(cycle)) = (of_this_cycle, self.cycle.as_mut()) {
            cycle.best = best;
        }
    }
}

/// Whether `request` re-measures `candidate` (any candidate for `None`).
pub(super) fn is_remeasure_of(request: &Request, candidate: Option<i64>) -> bool {
    matches!(request, Request::Evaluate { purpose: Purpose::Remeasure, candidate_id, .. }
        if candidate.is_none_or(|c| c == *candidate_id))
}
