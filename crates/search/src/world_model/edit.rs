//! Edit scripts (planner -> engine): their types, their validation against a copy of the model
//! and their all-or-nothing application.
//!
//! Submodules: `script` (the script, its ops and their field range checks), `patch` (partial
//! changes of impacts and actions), `error` (located rejection reasons), `apply` (validation
//! against a copy of the model and all-or-nothing application).

mod apply;
mod error;
mod patch;
mod script;

pub use apply::ApplyReport;
pub use error::{EditError, EditErrors};
pub use patch::{ActionPatch, ImpactPatch, ImpactsPatch};
pub(crate) use script::{new_node_problems, update_problems};
pub use script::{ActionEdit, EditOp, EditScript, NewNode, NodeUpdate, MAX_NEW_NODES};
