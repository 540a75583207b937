//! The harness backends, one module each, as the harness has one package module each
//! (`harness/ksearch_harness/backends/`): [`c`], [`cuda`], [`triton`], [`python`], [`mlx`], and
//! [`binding`] for `cpp` and `cuda_binding`.
//!
//! Each module states, as an implementation of [`HarnessBackend`], what is particular to its
//! backend on this side of the protocol: the devices it takes (in words, for errors), its
//! share of the compile time, the fields it adds to the request, and how the rest of the crate
//! treats it (static checks' comment syntax, the warm server, the sanitizer, the worker clock's
//! cross-check). What is shared lives here and in `request.rs`; [`torch`] holds what the three
//! backends whose harness imports PyTorch send alike.
//!
//! A new backend is a [`Language`] variant in ksearch-spec plus one module here: the match in
//! [`of`] does not compile until it names the module.

mod binding;
mod c;
mod cuda;
mod mlx;
mod python;
mod torch;
mod triton;

use mlx::mlx_dialect;

use crate::{EvalError, EvalOptions};
use ksearch_spec::{Language, RunsOn, Solution, Task};

/// What one harness backend adds to an evaluation; see the module's doc.
pub(crate) trait HarnessBackend: Sync {
    /// The devices it accepts, in words ([`EvalError::UnsupportedDevice`]'s `expected`).
    fn devices(&self) -> &'static str;
    /// The most seconds the compile step may take (the evaluation's timeout caps it further).
    fn compile_cap_s(&self) -> f64;
    /// Whether its harness imports PyTorch: a warm server preloads it, and serves the backend
    /// without being asked on a CUDA device ([`crate::warm`]).
    fn imports_torch(&self) -> bool;
    /// Whether compute-sanitizer can check what it launches on a CUDA device.
    fn sanitizable(&self) -> bool;
    /// Whether a build-only evaluation needs the GPU architecture given (`--arch`): with no
    /// device there is none to read it from.
    fn build_needs_arch(&self) -> bool;
    /// Whether the harness runs the candidate in its sandbox worker where the platform allows,
    /// so that a record must say whether it did (the worker clock's cross-check).
    fn runs_in_worker(&self) -> bool;
    /// Whether the candidate's file `path` takes `#` comments rather than C comments (the
    /// static checks blank comments before matching).
    fn hash_comments(&self, path: &str) -> bool;
    /// Adds the backend's own fields to the request being built.
    fn extend_request(&self, request: &mut RequestParts<'_>);
}

/// The parts of a request a backend adds to ([`HarnessBackend::extend_request`]).
pub(crate) struct RequestParts<'a> {
    /// The task evaluated.
    pub task: &'a Task,
    /// The solution evaluated.
    pub solution: &'a Solution,
    /// The evaluation's options.
    pub opts: &'a EvalOptions,
    /// The request's `candidate` object.
    pub candidate: &'a mut serde_json::Value,
    /// The request's `timing` object.
    pub timing: &'a mut serde_json::Value,
}

/// The backend that evaluates `language`.
pub(crate) fn of(language: Language) -> &'static dyn HarnessBackend {
    match language {
        Language::C => &c::C,
        Language::Cuda => &cuda::Cuda,
        Language::Triton => &triton::Triton,
        Language::Python => &python::Python,
        Language::Mlx => &mlx::Mlx,
        Language::Cpp => &binding::Cpp,
        Language::CudaBinding => &binding::CudaBinding,
    }
}

/// The harness backend for a language and the device it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// The language it evaluates.
    pub language: Language,
    /// The harness's backend name (`c`, `cuda`, `triton`, `python`, `mlx`:
    /// [`Language::harness_backend`]).
    pub name: &'static str,
    /// `cpu`, a CUDA device such as `cuda:0`, or MLX's `mlx:gpu` / `mlx:cpu`.
    pub device: String,
}

impl Backend {
    /// Whether the candidate runs on a GPU: no address-space limit (see [`crate::evaluate`]:
    /// CUDA, MLX's CUDA backend and Metal reserve far more address space than they use), and
    /// for CUDA devices CUDA-event timing, the build cache and the sanitizer.
    pub fn on_gpu(&self) -> bool {
        self.device.starts_with("cuda") || self.device == MLX_GPU
    }

    /// The kernel dialect of an MLX GPU (docs/mlx.md): Metal through mx.fast.metal_kernel on
    /// macOS, CUDA through mx.fast.cuda_kernel elsewhere. `None` for other backends and for
    /// `mlx:cpu`, which runs only Python launchers of MLX operations.
    pub fn dialect(&self) -> Option<&'static str> {
        (self.device == MLX_GPU).then(mlx_dialect)
    }

    /// What is particular to this backend.
    pub(crate) fn rules(&self) -> &'static dyn HarnessBackend {
        of(self.language)
    }
}

/// MLX's GPU device, as the harness names it (`mlx` is accepted for it).
const MLX_GPU: &str = "mlx:gpu";
/// MLX's CPU device.
const MLX_CPU: &str = "mlx:cpu";

/// The kind of device `name` is: `cpu`; `cuda` or `cuda:N`; `mlx` or `mlx:gpu`; `mlx:cpu`.
fn kind_of(name: &str) -> Option<RunsOn> {
    let cuda = name == "cuda"
        || name
            .strip_prefix("cuda:")
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    match name {
        "cpu" => Some(RunsOn::Cpu),
        "mlx" | MLX_GPU => Some(RunsOn::MlxGpu),
        MLX_CPU => Some(RunsOn::MlxCpu),
        _ if cuda => Some(RunsOn::CudaGpu),
        _ => None,
    }
}

/// The backend that evaluates `language`, on `device` (`None`: the language's default device,
/// [`Language::default_device`]: `cpu` for C, `cuda:0` for the CUDA backends, `mlx:gpu` for
/// MLX). A device must be of a kind the language runs on ([`Language::runs_on`]; the python
/// backend also runs on `cpu`, a CPU-only PyTorch).
pub fn backend_for(language: Language, device: Option<&str>) -> Result<Backend, EvalError> {
    let name = language.harness_backend();
    let device = match device {
        None => match language.default_device() {
            RunsOn::Cpu => "cpu".to_string(),
            RunsOn::CudaGpu => "cuda:0".to_string(),
            RunsOn::MlxGpu => MLX_GPU.to_string(),
            RunsOn::MlxCpu => MLX_CPU.to_string(),
        },
        Some(given) => match kind_of(given) {
            Some(RunsOn::MlxGpu) if language.runs_on().contains(&RunsOn::MlxGpu) => MLX_GPU.to_string(),
            Some(kind) if language.runs_on().contains(&kind) => given.to_string(),
            _ => {
                return Err(EvalError::UnsupportedDevice {
                    backend: name,
                    device: given.to_string(),
                    expected: of(language).devices(),
                })
            }
        },
    };
    Ok(Backend { language, name, device })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_and_devices() {
        use Language::{Cuda, Mlx, Python, Triton, C};
        let b = |l: Language, d: Option<&str>| backend_for(l, d).map(|b| (b.name, b.device.clone(), b.on_gpu()));
        assert_eq!(b(C, None).unwrap(), ("c", "cpu".to_string(), false));
        assert_eq!(b(Cuda, None).unwrap(), ("cuda", "cuda:0".to_string(), true));
        assert_eq!(
            b(Triton, Some("cuda:1")).unwrap(),
            ("triton", "cuda:1".to_string(), true)
        );
        assert_eq!(b(Python, None).unwrap(), ("python", "cuda:0".to_string(), true));
        assert_eq!(b(Python, Some("cpu")).unwrap(), ("python", "cpu".to_string(), false));
        for (language, device) in [
            (C, "cuda:0"),
            (Cuda, "cpu"),
            (Triton, "cpu"),
            (Cuda, "cuda:x"),
            (Python, "gpu"),
        ] {
            let err = backend_for(language, Some(device)).unwrap_err().to_string();
            assert!(err.contains(device), "{language} {device}: {err}");
        }
        assert_eq!(b(Mlx, None).unwrap(), ("mlx", "mlx:gpu".to_string(), true));
        assert_eq!(b(Mlx, Some("mlx")).unwrap(), ("mlx", "mlx:gpu".to_string(), true));
        assert_eq!(b(Mlx, Some("mlx:cpu")).unwrap(), ("mlx", "mlx:cpu".to_string(), false));
        for device in ["cuda:0", "cpu", "mlx:metal", ""] {
            let err = backend_for(Mlx, Some(device)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("'{device}'")) && err.contains("mlx:gpu or mlx:cpu"),
                "{device}: {err}"
            );
        }
        // A language no backend runs is not a Language: it is refused where it is read.
        assert!("fortran".parse::<Language>().is_err());
    }

    #[test]
    fn the_devices_in_words_are_todays() {
        let words: Vec<&str> = Language::ALL.into_iter().map(|l| of(l).devices()).collect();
        assert_eq!(
            words,
            [
                "cpu",
                "cuda or cuda:N",
                "cuda or cuda:N",
                "cpu, cuda or cuda:N",
                "mlx:gpu or mlx:cpu",
                "cpu",
                "cuda or cuda:N"
            ]
        );
        for l in Language::ALL {
            assert_eq!(backend_for(l, None).unwrap().name, l.harness_backend());
        }
    }
}
