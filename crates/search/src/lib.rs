//! The search: the world model (a decision tree of optimisation hypotheses, edited by the
//! planner through validated edit scripts), and the engine that drives rounds and cycles.

pub mod engine;
pub mod tuner;
pub mod world_model;
