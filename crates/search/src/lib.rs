//! The search: the world model (a decision tree of optimisation hypotheses, edited by the
//! planner through validated edit scripts), and the engine that drives rounds and cycles;
//! the knob tuner; the comparison rule. The engine is a pure state machine (events in, requests
//! out): nothing in this crate does I/O, which is the driver's (ksearch-run) job.

#![warn(missing_docs)]

pub mod engine;
pub mod tuner;
pub mod world_model;
