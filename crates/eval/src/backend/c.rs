//! Backend `c` (the harness's `backends/c/`): C11 compiled by the host's C compiler and run on
//! the CPU, in the sandbox worker where the platform allows; always destination-passing, so the
//! request carries no calling convention, and nothing of CUDA applies.

use super::{HarnessBackend, RequestParts};

/// Backend `c`.
pub(super) struct C;

impl HarnessBackend for C {
    fn devices(&self) -> &'static str {
        "cpu"
    }

    fn compile_cap_s(&self) -> f64 {
        30.0
    }

    fn imports_torch(&self) -> bool {
        false
    }

    fn sanitizable(&self) -> bool {
        false
    }

    fn build_needs_arch(&self) -> bool {
        false
    }

    fn runs_in_worker(&self) -> bool {
        true
    }

    fn hash_comments(&self, _path: &str) -> bool {
        false
    }

    fn extend_request(&self, _request: &mut RequestParts<'_>) {}
}
