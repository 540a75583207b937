//! Backend `triton` (the harness's `backends/triton/`): a Python module with
//! Triton kernels, loaded into the harness and called with torch tensors on a CUDA device, as
//! the task's `[kernel].calling` says; Triton compiles at the first (correctness) call.

use super::{torch, HarnessBackend, RequestParts};

/// Backend `triton`.
pub(super) struct Triton;

impl HarnessBackend for Triton {
    fn devices(&self) -> &'static str {
        "cuda or cuda:N"
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
