//! The `world-model` strategy's steps: planner requests and answers, and cycles (select an
//! action, code rounds, end the cycle with the evidence), as docs/engine.md, "The loop", describes.

use super::budget::ResumeAt;
use super::{render, CodeKind, Cycle, Engine, EngineError, PlanKind, Request};
use crate::world_model::Exploration;
use ksearch_messages::extract::{first_json_object, retry_instruction};
use ksearch_messages::Message;

impl Engine {
    // --- planner ------------------------------------------------------------------------------

    pub(super) fn request_plan(&mut self, plan: PlanKind, feedback: Option<String>) -> Result<(), EngineError> {
        if feedback.is_none() {
            self.planner_try = 0;
        }
        let user = render::plan_prompt(self, &plan, feedback.as_deref()).map_err(EngineError::Internal)?;
        let system = render::planner_system(self).map_err(EngineError::Internal)?;
        let id = self.next_id();
        self.issue(
            Request::Plan {
                id,
                plan,
                messages: vec![Message::system(system), Message::user(user)],
            },
            self.round,
        );
        Ok(())
    }

    /// A planner answer (or the failure to get one).
    pub(super) fn on_planner(&mut self, answer: Result<&String, &String>) -> Result<(), EngineError> {
        let Some(Request::Plan { plan, .. }) = self.answering.clone().map(|a| a.request) else {
            return Err(EngineError::Internal("planner answer without a plan request".into()));
        };
        let outcome = match answer {
            Ok(text) => self.apply_plan(&plan, text),
            Err(error) => Err(format!("the request failed: {error}")),
        };
        match outcome {
            Ok(()) => self.after_plan(&plan),
            Err(feedback) => {
                self.planner_try += 1;
                if self.planner_try < self.config.planner_tries {
                    self.request_plan(plan, Some(feedback))
                } else {
                    // Give up on this planner step; the search goes on with the tree as it is.
                    // A refine or too-hard step given up keeps its evidence: the propose prompt
                    // that may follow shows it (docs/engine.md, "Rejected answers").
                    if matches!(plan, PlanKind::Refine { .. } | PlanKind::TooHard { .. }) {
                        self.gave_up = Some(render::gave_up(self, &plan, &feedback));
                    }
                    self.after_plan(&plan)
                }
            }
        }
    }

    /// Parses and applies a planner answer; `Err` carries the feedback for a re-ask: every
    /// error of the answer at once.
    pub(super) fn apply_plan(&mut self, plan: &PlanKind, text: &str) -> Result<(), String> {
        match self.checked_plan(plan, text) {
            Ok(trial) => {
                self.wm = trial;
                Ok(())
            }
            Err(errors) => {
                let list: Vec<String> = errors.iter().map(|e| format!("- {e}")).collect();
                Err(format!(
                    "Your answer was rejected as a whole (nothing was applied). Every error found:\n{}\nResend the complete, corrected answer.",
                    list.join("\n")
                ))
            }
        }
    }

    /// The world model a planner answer would make, or every error it has (the JSON's, the
    /// script's shape and ranges, the rules that depend on the tree, and the step's own rule).
    pub(super) fn checked_plan(
        &self,
        plan: &PlanKind,
        text: &str,
    ) -> Result<crate::world_model::WorldModel, Vec<String>> {
        let value = first_json_object(text).map_err(|e| vec![retry_instruction(&e, "one JSON object as described")])?;
        let mut trial = self.wm.clone();
        trial
            .apply_value(&value, self.round)
            .map_err(|errors| errors.iter().map(|e| e.to_string()).collect::<Vec<_>>())?;
        if *plan == PlanKind::Init && trial.frontier().is_empty() {
            return Err(vec![
                "your answer created no action the coder could implement: insert three alternative first \
                 steps under \"root\", each with an `action`"
                    .to_string(),
            ]);
        }
        Ok(trial)
    }

    pub(super) fn after_plan(&mut self, plan: &PlanKind) -> Result<(), EngineError> {
        match plan {
            PlanKind::Init if self.wm.frontier().is_empty() => {
                self.stop_reason = Some("the planner gave no valid initial plan".into());
                self.finalize()
            }
            PlanKind::Propose => self.start_cycle(false),
            _ => self.start_cycle(true),
        }
    }

    // --- cycles ------------------------------------------------------------------------------

    pub(super) fn start_cycle(&mut self, may_propose: bool) -> Result<(), EngineError> {
        if self.round >= self.config.rounds {
            self.resume_at = Some(ResumeAt::StartCycle { may_propose });
            return self.finalize();
        }
        let frontier = self.wm.frontier().len();
        let best = self
            .best_solved()
            .map(|b| (b.node_id.clone(), b.solution_ref.as_ref().map_or(0, |s| s.candidate_id)));
        let best_has_open_child = match &best {
            Some((node_id, _)) => self.wm.tree().children(node_id).iter().any(|c| c.is_open_action()),
            None => true,
        };
        if may_propose && (frontier < self.config.min_frontier || !best_has_open_child) {
            let why = match (&best, frontier < self.config.min_frontier) {
                (_, true) => format!("only {frontier} open action(s) can be selected now"),
                // Named, so the planner knows which node (the one holding the run's best
                // candidate) wants a next step: a child that is open and carries an action.
                (Some((node_id, id)), false) => format!(
                    "the best solved node ({node_id}, holding the run's best, candidate {id}) has no open child \
                     with an action"
                ),
                (None, false) => "the best solved node has no open next step".to_string(),
            };
            self.propose_reason = why;
            return self.request_plan(PlanKind::Propose, None);
        }
        let exploration = (self.config.exploration > 0.0).then_some(Exploration {
            c: self.config.exploration,
            visits: &self.visits,
        });
        let Some(node_id) = self.wm.select_action(self.config.difficulty_cap, exploration) else {
            if may_propose {
                self.propose_reason = format!("no open action has difficulty <= {}", self.config.difficulty_cap);
                return self.request_plan(PlanKind::Propose, None);
            }
            self.stop_reason = Some("no action is left to try".into());
            return self.finalize();
        };
        self.cycle_count += 1;
        self.gave_up = None;
        *self.visits.entry(node_id.clone()).or_insert(0) += 1;
        let _ = self.wm.set_active_leaf(&node_id);
        let base = self.base_for(&node_id);
        self.cycle = Some(Cycle {
            node_id,
            base,
            attempts: Vec::new(),
            best: None,
            stale: 0,
            step_size: 0,
            step_left: 0,
            step_improved: false,
        });
        self.request_code(CodeKind::Action)
    }

    /// The code a node's action builds on: the nearest solved ancestor's candidate.
    pub(super) fn base_for(&self, node_id: &str) -> Option<i64> {
        let path = self.wm.tree().path_to(node_id);
        path.iter()
            .rev()
            .skip(1)
            .find_map(|n| n.solution_ref.as_ref().map(|s| s.candidate_id))
    }

    /// The cycle's next step: one code request, or `samples` at once (each its own round, up to
    /// the rounds left), all for the same node, kind and base.
    pub(super) fn request_code(&mut self, kind: CodeKind) -> Result<(), EngineError> {
        let Some(cycle) = self.cycle.clone() else {
            return Err(EngineError::Internal("code request outside a cycle".into()));
        };
        let left = self.config.rounds.saturating_sub(self.round).max(1);
        let samples = self.config.samples.max(1).min(left);
        let user = render::code_prompt(self, kind, &cycle.node_id).map_err(EngineError::Internal)?;
        let system = render::coder_system(self).map_err(EngineError::Internal)?;
        let base_candidate = match kind {
            CodeKind::Action => cycle.base,
            CodeKind::Debug => cycle.attempts.last().and_then(|a| a.candidate).or(cycle.base),
            CodeKind::Improve => cycle.best,
        };
        if let Some(c) = self.cycle.as_mut() {
            c.step_size = samples;
            c.step_left = samples;
            c.step_improved = false;
        }
        for i in 1..=samples {
            self.round += 1;
            let id = self.next_id();
            let user = if samples > 1 {
                format!("{user}{}", render::sample_note(i, samples))
            } else {
                user.clone()
            };
            self.issue(
                Request::Code {
                    id,
                    code: kind,
                    node_id: cycle.node_id.clone(),
                    base_candidate,
                    messages: vec![Message::system(system.clone()), Message::user(user)],
                },
                self.round,
            );
        }
        Ok(())
    }

    pub(super) fn after_attempt(&mut self) -> Result<(), EngineError> {
        let Some(cycle) = self.cycle.clone() else {
            return Err(EngineError::Internal("attempt outside a cycle".into()));
        };
        let budget_spent = self.round >= self.config.rounds;
        if budget_spent || cycle.stale >= self.config.stagnation_window {
            return self.end_cycle(budget_spent);
        }
        self.request_code(if cycle.best.is_some() {
            CodeKind::Improve
        } else {
            CodeKind::Debug
        })
    }

    pub(super) fn end_cycle(&mut self, then_finalize: bool) -> Result<(), EngineError> {
        let Some(cycle) = self.cycle.take() else {
            return Err(EngineError::Internal("end of a cycle that did not start".into()));
        };
        let next = match cycle.best {
            Some(best) => {
                let solution = self.solution_ref(best);
                self.wm
                    .attach_solution(&cycle.node_id, solution, self.round)
                    .map_err(|e| EngineError::Internal(e.to_string()))?;
                PlanKind::Refine {
                    node_id: cycle.node_id.clone(),
                }
            }
            None => {
                let reason = render::last_failure(self, &cycle.attempts);
                self.wm
                    .mark_too_hard(&cycle.node_id, reason, self.round)
                    .map_err(|e| EngineError::Internal(e.to_string()))?;
                PlanKind::TooHard {
                    node_id: cycle.node_id.clone(),
                }
            }
        };
        // The planner's refine/too-hard prompt describes the cycle that just ended.
        self.last_cycle = Some(cycle);
        if then_finalize {
            self.resume_at = Some(ResumeAt::Plan(next));
            self.finalize()
        } else {
            self.request_plan(next, None)
        }
    }
}
