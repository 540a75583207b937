//! What the compiler reported for one kernel: the vocabulary shared by the evaluation record
//! (crates/eval), the search's summaries and prompts (crates/search) and the report.

use serde::{Deserialize, Serialize};

/// One kernel's resources from ptxas `-v` (docs/protocol.md, "Compiler resource report").
/// `None` where this ptxas version does not print the figure (CUDA 13 omits constant memory for
/// sm_90a, older ones barriers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    /// The kernel's symbol, mangled as ptxas prints it.
    pub name: String,
    /// The target ptxas compiled it for (`sm_90a`); empty when not recorded.
    #[serde(default)]
    pub arch: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes spilled to local memory per thread: spill stores.
    #[serde(default)]
    pub spill_store_bytes: Option<u64>,
    /// Bytes reloaded from spills per thread: spill loads.
    #[serde(default)]
    pub spill_load_bytes: Option<u64>,
    /// Bytes of stack frame per thread.
    #[serde(default)]
    pub stack_frame_bytes: Option<u64>,
    /// Static shared memory per block.
    #[serde(default)]
    pub shared_bytes: u64,
    /// Constant memory, summed over the banks ptxas lists (kernel parameters included).
    #[serde(default)]
    pub constant_bytes: Option<u64>,
    /// Barriers the kernel uses (ptxas's `used N barriers`).
    #[serde(default)]
    pub barriers: Option<u32>,
}
