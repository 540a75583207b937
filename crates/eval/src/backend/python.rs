//! Backend `python` (the harness's `backends/python/`): a Python module of plain
//! PyTorch code (native baselines, KernelBench-style modules), called with torch tensors as the
//! task's `[kernel].calling` says, on a CUDA device or, with a CPU-only PyTorch, the CPU.

use super::{torch, HarnessBackend, RequestParts};

/// Backend `python`.
pub(super) struct Python;

impl HarnessBackend for Python {
    fn devices(&self) -> &'static str {
        "cpu, cuda or cuda:N"
    }

    fn compile_cap_s(&self) -> f64 {
        30.0
    }

    fn imports_torch(&self) -> bool {
        true
    }

    fn sanitizable(&self) -> bool {
        true
    }

    fn build_needs_arch(&self) -> bool {
        false
    }

    fn runs_in_worker(&self) -> bool {
        false
    }

    fn hash_comments(&self, _path: &str) -> bool {
        true
    }

    fn extend_request(&self, request: &mut RequestParts<'_>) {
        torch::extend_request(request);
    }
}
