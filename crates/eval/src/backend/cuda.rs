//! Backend `cuda` (the harness's `backends/cuda/`, building with `cuda/nvcc.py`): CUDA C++ built by
//! nvcc and loaded into the harness, an `extern "C"` host function called with device pointers
//! on a CUDA device. nvcc on a large kernel takes longer than a C compiler, and a build without
//! a device must be told the architecture.

use super::{torch, HarnessBackend, RequestParts};

/// Backend `cuda`.
pub(super) struct Cuda;

impl HarnessBackend for Cuda {
    fn devices(&self) -> &'static str {
        "cuda or cuda:N"
    }

    fn compile_cap_s(&self) -> f64 {
        120.0
    }

    fn imports_torch(&self) -> bool {
        true
    }

    fn sanitizable(&self) -> bool {
        true
    }

    fn build_needs_arch(&self) -> bool {
        true
    }

    fn runs_in_worker(&self) -> bool {
        false
    }

    fn hash_comments(&self, _path: &str) -> bool {
        false
    }

    fn extend_request(&self, request: &mut RequestParts<'_>) {
        torch::extend_request(request);
    }
}
