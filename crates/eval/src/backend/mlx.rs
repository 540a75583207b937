//! Backend `mlx` (the harness's `backends/mlx/`, docs/mlx.md): a launch spec (TOML or JSON,
//! with the kernel body in CUDA or Metal) or a Python launcher of MLX operations, on MLX's GPU
//! or CPU. MLX allocates the outputs, which the candidate returns, and compiles kernels itself
//! (NVRTC, Metal) inside its own runtime: no calling convention, nvcc architecture, build cache,
//! CUDA graphs or compute-sanitizer apply. The device's kernel dialect is sent with the device
//! (see `request.rs`).

use super::{HarnessBackend, RequestParts};

/// Backend `mlx`.
pub(super) struct Mlx;

/// The dialect MLX runs kernels in on this platform: Metal on macOS, CUDA elsewhere.
pub(crate) fn mlx_dialect() -> &'static str {
    if cfg!(target_os = "macos") {
        "metal"
    } else {
        "cuda"
    }
}

impl HarnessBackend for Mlx {
    fn devices(&self) -> &'static str {
        "mlx:gpu or mlx:cpu"
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
        false
    }

    /// Launch specs (TOML) and launchers (Python) take `#` comments; kernel bodies (CUDA, Metal)
    /// C comments.
    fn hash_comments(&self, path: &str) -> bool {
        path.ends_with(".toml") || path.ends_with(".py")
    }

    fn extend_request(&self, _request: &mut RequestParts<'_>) {}
}
