//! Backends `cpp` and `cuda_binding` (the harness's `backends/cpp/` and `backends/cuda_binding/`,
//! which share `backends/cpp/build.py`): FlashInfer-Bench's C++ and CUDA sources built through
//! their binding (tvm-ffi's `tvm_ffi.cpp.build` or torch's `cpp_extension.load`) into an
//! extension module, cached by content hash, and its entry called with tensors: NumPy arrays
//! on the CPU for `cpp`, torch tensors on a CUDA device for `cuda_binding`. The module is
//! loaded into the harness's own process (the sandbox worker calls plain C symbols only), and a
//! C++ extension build, with ninja, takes longer than one C compile.

use super::{torch, HarnessBackend, RequestParts};
use serde_json::json;

/// Backend `cpp`.
pub(super) struct Cpp;
/// Backend `cuda_binding`.
pub(super) struct CudaBinding;

/// The fields both add: the binding, and the cache of built modules.
fn extend(r: &mut RequestParts<'_>) {
    r.candidate["binding"] = json!(r.solution.spec.binding.map(|b| b.as_str()));
    r.candidate["target_hardware"] = json!(r.solution.spec.target_hardware);
    r.candidate["build"]["arch"] = json!(r.opts.arch);
    r.candidate["build"]["cache_dir"] = json!(r.opts.build_cache);
}

impl HarnessBackend for Cpp {
    fn devices(&self) -> &'static str {
        "cpu"
    }

    fn compile_cap_s(&self) -> f64 {
        180.0
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
        false
    }

    fn hash_comments(&self, _path: &str) -> bool {
        false
    }

    fn extend_request(&self, request: &mut RequestParts<'_>) {
        extend(request);
    }
}

impl HarnessBackend for CudaBinding {
    fn devices(&self) -> &'static str {
        "cuda or cuda:N"
    }

    fn compile_cap_s(&self) -> f64 {
        180.0
    }

    fn imports_torch(&self) -> bool {
        true
    }

    fn sanitizable(&self) -> bool {
        true
    }

    fn build_needs_arch(&self) -> bool {
        false // sm_90 when no device and no --arch
    }

    fn runs_in_worker(&self) -> bool {
        false
    }

    fn hash_comments(&self, _path: &str) -> bool {
        false
    }

    fn extend_request(&self, request: &mut RequestParts<'_>) {
        torch::extend_request(request);
        extend(request);
    }
}
