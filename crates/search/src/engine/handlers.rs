//! The engine's handlers of answering events: `started`, the coder's answers and the
//! evaluations (the planner's are in cycles.rs), and the candidates and requests they make.
//! `Engine::apply` (mod.rs) routes each event here.

use super::{
    evolve, held_back_by_noise_of, knob_sweep, parse_description, refine, Attempt, AttemptRecord, Candidate,
    CompareRule, Engine, EngineConfig, EngineError, EvalSummary, Evolve, Phase, PlanKind, Purpose, Request, Source,
    Strategy, TaskBrief, WorkloadSummary,
};
use crate::world_model::{ComputedSignals, SolutionRef};
use ksearch_messages::extract::code_files;

impl Engine {
    pub(super) fn on_started(&mut self, task: &TaskBrief, config: &EngineConfig) -> Result<(), EngineError> {
        self.task = Some(task.clone());
        self.config = config.clone();
        self.phase = Phase::Running;
        if config.strategy == Strategy::Evolve {
            self.evolve = Some(Evolve::new(config));
        }
        match &task.seed {
            Some(sources) => {
                let id = self.add_candidate(None, self.wm.tree().root_id().to_string(), sources.clone(), 0);
                self.request_evaluation(id, Purpose::Search);
            }
            None => self.begin()?,
        }
        Ok(())
    }

    /// After the seed (if any) is measured: the strategy's first request.
    pub(super) fn begin(&mut self) -> Result<(), EngineError> {
        match self.config.strategy {
            Strategy::WorldModel => self.request_plan(PlanKind::Init, None),
            Strategy::Refine => refine::start(self),
            Strategy::Evolve => evolve::start(self),
        }
    }

    /// A round of `refine` or `evolve` is over (its candidate measured, or no code came back).
    pub(super) fn baseline_attempt_done(&mut self, attempt: refine::Tried) -> Result<(), EngineError> {
        match self.config.strategy {
            Strategy::Refine => refine::attempt_done(self, attempt),
            Strategy::Evolve => evolve::attempt_done(self, attempt, self.answered_round()),
            Strategy::WorldModel => Err(EngineError::Internal(
                "the world-model strategy has no baseline rounds".into(),
            )),
        }
    }

    pub(super) fn add_candidate(
        &mut self,
        parent: Option<i64>,
        node_id: String,
        sources: Vec<Source>,
        round: u32,
    ) -> i64 {
        let id = self.candidates.len() as i64 + 1;
        self.candidates.push(Candidate {
            id,
            parent,
            node_id,
            round,
            cycle: self.cycle_count,
            sources,
            result: None,
            remeasured: Vec::new(),
            superseded: None,
            final_result: None,
            note: None,
        });
        id
    }

    pub(super) fn request_evaluation(&mut self, candidate_id: i64, purpose: Purpose) {
        let id = self.next_id();
        let language = self.task.as_ref().map(|t| t.language.to_string()).unwrap_or_default();
        let (sources, round) = self
            .candidate(candidate_id)
            .map(|c| (c.sources.clone(), c.round))
            .unwrap_or_default();
        self.issue(
            Request::Evaluate {
                id,
                candidate_id,
                purpose,
                language,
                sources,
            },
            round,
        );
    }

    pub(super) fn on_coder(&mut self, answer: Result<&String, &String>) -> Result<(), EngineError> {
        let Some(Request::Code {
            id: request_id,
            code,
            node_id,
            base_candidate,
            ..
        }) = self.answering.clone().map(|a| a.request)
        else {
            return Err(EngineError::Internal("coder answer without a code request".into()));
        };
        let default_file = self.task_ref()?.default_file.clone();
        let description = answer.ok().and_then(|t| parse_description(t));
        let files = match answer {
            Ok(text) => code_files(text, Some(&default_file)).map_err(|e| format!("format_error: {e}")),
            Err(error) => Err(format!("llm_error: {error}")),
        };
        if let Err(failure) = &files {
            self.attempts.push(AttemptRecord {
                round: self.answered_round(),
                kind: Some(code),
                node_id: node_id.clone(),
                request: Some(request_id.clone()),
                parent: base_candidate,
                candidate: None,
                description: description.clone(),
                failure: Some(failure.clone()),
            });
        }
        match files {
            Ok(files) => {
                let sources = files
                    .into_iter()
                    .map(|f| Source {
                        path: f.path,
                        content: f.content,
                    })
                    .collect();
                let round = self.answered_round();
                let id = self.add_candidate(base_candidate, node_id.clone(), sources, round);
                self.attempts.push(AttemptRecord {
                    round,
                    kind: Some(code),
                    node_id,
                    request: Some(request_id),
                    parent: base_candidate,
                    candidate: Some(id),
                    description,
                    failure: None,
                });
                if let Some(cycle) = self.cycle.as_mut() {
                    cycle.attempts.push(Attempt {
                        round,
                        kind: code,
                        candidate: Some(id),
                        failure: None,
                    });
                }
                self.request_evaluation(id, Purpose::Search);
                Ok(())
            }
            Err(failure) if self.config.strategy != Strategy::WorldModel => self.baseline_attempt_done(refine::Tried {
                candidate: None,
                failure: Some(failure),
                base: base_candidate,
            }),
            Err(failure) => {
                if let Some(cycle) = self.cycle.as_mut() {
                    cycle.attempts.push(Attempt {
                        round: self.round,
                        kind: code,
                        candidate: None,
                        failure: Some(failure),
                    });
                }
                self.attempt_resolved(false)
            }
        }
    }

    pub(super) fn on_evaluated(&mut self, candidate_id: i64, summary: &EvalSummary) -> Result<(), EngineError> {
        let purpose = match self.answering.as_ref().map(|a| &a.request) {
            Some(Request::Evaluate { purpose, .. }) => *purpose,
            _ => return Err(EngineError::Internal("evaluation without a request".into())),
        };
        let Some(index) = self.candidates.iter().position(|c| c.id == candidate_id) else {
            return Err(EngineError::Internal(format!("no candidate {candidate_id}")));
        };
        match purpose {
            Purpose::Final => {
                self.candidates[index].final_result = Some(summary.clone());
                return self.next_final();
            }
            Purpose::Remeasure => return self.on_remeasured(index, summary),
            Purpose::Search => {}
        }
        self.candidates[index].result = Some(summary.clone());
        let incumbent = self
            .best
            .and_then(|b| self.candidate(b))
            .and_then(|c| c.result.as_ref());
        // Times of another harness version are not compared with: the best is measured again
        // first (remeasure.rs), unless that was done and did not pass.
        let other_harness = self.best.is_some_and(|b| self.needs_harness_remeasure(b, summary));
        let new_best = !other_harness && self.beats(summary, incumbent);
        let held_back = other_harness
            || (!new_best
                && self.config.compare == CompareRule::Paired
                && incumbent.is_some_and(|b| held_back_by_noise_of(summary, b)));
        if new_best {
            self.best = Some(candidate_id);
            self.challengers.clear();
        } else if held_back {
            self.challenge_best(candidate_id, other_harness);
        }
        self.update_signals(summary);
        // Round 0 is the seed; every other search evaluation ends a baseline round.
        if self.config.strategy != Strategy::WorldModel && self.answered_round() > 0 {
            let base = self.candidates[index].parent;
            return self.baseline_attempt_done(refine::Tried {
                candidate: Some(candidate_id),
                failure: None,
                base,
            });
        }
        if self.cycle.is_none() {
            // The seed: attached to the root when it passes, then the planner starts.
            if summary.passed() {
                let root = self.wm.tree().root_id().to_string();
                let solution = self.solution_ref(candidate_id);
                self.wm
                    .attach_solution(&root, solution, 0)
                    .map_err(|e| EngineError::Internal(e.to_string()))?;
            }
            return self.begin();
        }
        let cycle_best = self
            .cycle
            .as_ref()
            .and_then(|c| c.best)
            .and_then(|b| self.candidate(b))
            .and_then(|c| c.result.clone());
        // The code a prompt shows as the best is the candidate the run calls best: a candidate
        // that became the run's best is its cycle's best too (under the paired rule it beat the
        // run's best, which the cycle's best did not beat or is).
        let cycle_best_is_best = self.cycle.as_ref().and_then(|c| c.best) == self.best;
        let improved = (!(other_harness && cycle_best_is_best) && self.beats(summary, cycle_best.as_ref()))
            || (new_best && self.config.compare == CompareRule::Paired);
        if knob_sweep::is_variant(self, candidate_id) {
            // A sweep variant can become the cycle's best, but the coder's staleness count is
            // about the coder's attempts, so it is left alone.
            if let (true, Some(cycle)) = (improved, self.cycle.as_mut()) {
                cycle.best = Some(candidate_id);
            }
            if knob_sweep::variant_done(self, candidate_id)? {
                return Ok(());
            }
            return self.after_attempt();
        }
        if let (true, Some(cycle)) = (improved, self.cycle.as_mut()) {
            cycle.best = Some(candidate_id);
        }
        self.attempt_resolved(improved)
    }

    /// One attempt of the cycle's current step is resolved (`improved`: it beat the cycle's
    /// best). When the step's last attempt is, the step counts as stale unless one of its
    /// attempts improved, a knob sweep of the improved best may start, and the cycle goes on.
    pub(super) fn attempt_resolved(&mut self, improved: bool) -> Result<(), EngineError> {
        let Some(cycle) = self.cycle.as_mut() else {
            return Err(EngineError::Internal("attempt outside a cycle".into()));
        };
        cycle.step_left = cycle.step_left.saturating_sub(1);
        cycle.step_improved |= improved;
        if cycle.step_left > 0 {
            return Ok(());
        }
        let step_improved = cycle.step_improved;
        if step_improved {
            cycle.stale = 0;
        } else {
            cycle.stale += cycle.step_size.max(1);
        }
        let best = cycle.best;
        if let (true, Some(best)) = (step_improved, best) {
            if knob_sweep::maybe_start(self, best) {
                return Ok(());
            }
        }
        self.after_attempt()
    }

    pub(super) fn solution_ref(&self, candidate_id: i64) -> SolutionRef {
        let result = self.candidate(candidate_id).and_then(|c| c.result.as_ref());
        let latency_ns = result
            .map(|r| {
                let medians: Vec<f64> = r
                    .workloads
                    .iter()
                    .filter_map(|w| w.median_ns)
                    .filter(|m| *m > 0.0)
                    .collect();
                if medians.is_empty() {
                    0.0
                } else {
                    (medians.iter().map(|m| m.ln()).sum::<f64>() / medians.len() as f64).exp()
                }
            })
            .unwrap_or(0.0);
        SolutionRef {
            candidate_id,
            speedup: result.and_then(|r| r.speedup).unwrap_or(0.0),
            latency_ns,
            round: self.candidate(candidate_id).map(|c| c.round).unwrap_or(self.round),
        }
    }

    pub(super) fn update_signals(&mut self, summary: &EvalSummary) {
        let best = self.best().map(|c| (c.id, c.speedup()));
        let geo = |f: fn(&WorkloadSummary) -> Option<f64>| {
            let v: Vec<f64> = summary.workloads.iter().filter_map(f).filter(|x| *x > 0.0).collect();
            (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
        };
        let signals = ComputedSignals {
            last_status: Some(summary.status.clone()),
            last_latency_ns: geo(|w| w.median_ns),
            reference_latency_ns: geo(|w| w.reference_median_ns),
            last_speedup: summary.speedup,
            best_speedup: best.and_then(|b| b.1),
            best_candidate_id: best.map(|b| b.0),
            round: self.round,
        };
        let _ = self.wm.set_signals(signals);
    }
}
