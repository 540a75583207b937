//! The knowledge base as the CLI uses it: the target device of a task, what its prompts cite at
//! a context level (figures, patterns, translation layers, properties, expertise), its hardware
//! figures and the pattern priors for the knob tuner.
//!
//! The knowledge base is the built-in one, with the folder named by `KSEARCH_KB` laid over it
//! when that variable is set (docs/knowledge-base.md).

pub mod hardware;
pub mod host;
mod load;
mod prompt;
mod target;
#[cfg(test)]
mod test_support;

// What other modules use, at the paths they had before the split.
pub use hardware::{task_figures, tuner};
pub use load::{describe, kb, kb_with, overrides_dir, KB_ENV};
pub use prompt::{brief, brief_for, knowledge_for, knowledge_on, Knowledge};
pub use target::{target_of, Platform};
