//! The languages kernels are written in (`[kernel].language`, a solution's `spec.language`), and
//! the facts about each that the rest of ksearch acts on: which harness backend evaluates it,
//! the devices it runs on, and how its entry point is called.
//!
//! A new language is one more [`Language`] variant: every `match` on it that states a fact (here,
//! ksearch-eval's per-backend request building, ksearch-run's prompt contracts) then fails to
//! compile until the new language has its answer.
//!
//! FlashInfer-Bench's C++ and CUDA built through a binding (tvm-ffi or torch) are languages of
//! their own here ([`Language::Cpp`], [`Language::CudaBinding`]) rather than a flag on `c` and
//! `cuda`: their entry is called with tensors (DLPack arrays, torch tensors), not with raw
//! pointers and the var axes, so every fact above (the backend, the calling style, the prompt
//! contract) differs, and a typed variant makes each `match` answer for them. Which binding
//! builds them is the solution's [`crate::Binding`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A kernel language, spelled in task.toml and Solution JSON as `c`, `cuda`, `triton`, `python`,
/// `mlx`, `cpp` or `cuda_binding` (exactly, lower case; a FlashInfer-Bench `cuda` solution with
/// a binding is read as `cuda_binding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Language {
    /// C11 compiled for the host CPU, an `extern` function in destination-passing style.
    C,
    /// CUDA C++ compiled by nvcc, an `extern "C"` host function taking device pointers.
    Cuda,
    /// A Python module with Triton kernels, called with torch tensors.
    Triton,
    /// A Python module of plain PyTorch code (native baselines, KernelBench-style modules).
    Python,
    /// An MLX launch spec (`mx.fast.cuda_kernel` / `mx.fast.metal_kernel`) or Python launcher.
    Mlx,
    /// FlashInfer-Bench's `cpp`: C++ built through a binding (tvm-ffi or torch, the solution's
    /// [`crate::Binding`]) into a Python extension module, its entry called on the CPU with the
    /// inputs (and, destination-passing, the outputs) as tensors.
    Cpp,
    /// FlashInfer-Bench's `cuda` built through a binding (tvm-ffi or torch) into a Python
    /// extension module, its entry called with torch tensors on a CUDA device.
    CudaBinding,
}

/// A kind of device a language's candidates run on (the harness's `device.name` families).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunsOn {
    /// The host CPU (`cpu`).
    Cpu,
    /// An NVIDIA GPU through CUDA (`cuda`, `cuda:N`).
    CudaGpu,
    /// MLX's GPU (`mlx:gpu`): Metal on macOS, CUDA device 0 of the process on Linux.
    MlxGpu,
    /// MLX's CPU device (`mlx:cpu`), which runs Python launchers of MLX operations only.
    MlxCpu,
}

impl RunsOn {
    /// Whether this is a GPU.
    pub fn is_gpu(self) -> bool {
        match self {
            RunsOn::CudaGpu | RunsOn::MlxGpu => true,
            RunsOn::Cpu | RunsOn::MlxCpu => false,
        }
    }
}

/// How the harness calls a language's entry point (docs/protocol.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallingStyle {
    /// Always destination-passing: a native function writing its outputs into buffers passed
    /// after the inputs (`c`, `cuda`).
    DestinationPassing,
    /// A Python module's entry, called as the task's `[kernel].calling` says (`triton`,
    /// `python`).
    PythonModule,
    /// The candidate returns its outputs, which MLX allocates (`mlx`).
    ReturnsOutputs,
    /// An extension module's entry called with tensors: the inputs, then the outputs when the
    /// solution is destination-passing, else it returns them (`cpp`, `cuda_binding`).
    Binding,
}

/// A language name that is none of [`Language::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language '{given}'; expected one of {}", Language::names().join(", "))]
pub struct UnknownLanguage {
    /// The name as given.
    pub given: String,
}

impl Language {
    /// Every language, in the order messages list them.
    pub const ALL: [Language; 7] = [
        Language::C,
        Language::Cuda,
        Language::Triton,
        Language::Python,
        Language::Mlx,
        Language::Cpp,
        Language::CudaBinding,
    ];

    /// The spelling task.toml, Solution JSON and the harness protocol use.
    pub const fn as_str(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cuda => "cuda",
            Language::Triton => "triton",
            Language::Python => "python",
            Language::Mlx => "mlx",
            Language::Cpp => "cpp",
            Language::CudaBinding => "cuda_binding",
        }
    }

    /// Every language's spelling, in the order of [`Language::ALL`].
    pub fn names() -> [&'static str; 7] {
        Language::ALL.map(Language::as_str)
    }

    /// The harness backend that evaluates it (the request's `device.backend`; the harness's
    /// `ksearch_harness.backends` registry key). Each language has its own backend, named as
    /// the language is.
    pub fn harness_backend(self) -> &'static str {
        self.as_str()
    }

    /// The language whose harness backend is `name` (an evaluation record's
    /// `provenance.backend`), if any.
    pub fn of_backend(name: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.harness_backend() == name)
    }

    /// The kinds of device its candidates run on, the default first: the CPU for `c` and `cpp`; a
    /// CUDA GPU for `cuda`, `cuda_binding` and `triton`; a CUDA GPU or (a CPU-only PyTorch) the CPU for `python`; MLX's
    /// GPU or CPU for `mlx`.
    pub fn runs_on(self) -> &'static [RunsOn] {
        match self {
            Language::C => &[RunsOn::Cpu],
            Language::Cuda | Language::Triton => &[RunsOn::CudaGpu],
            Language::Python => &[RunsOn::CudaGpu, RunsOn::Cpu],
            Language::Mlx => &[RunsOn::MlxGpu, RunsOn::MlxCpu],
            Language::Cpp => &[RunsOn::Cpu],
            Language::CudaBinding => &[RunsOn::CudaGpu],
        }
    }

    /// The device its candidates run on when none is named.
    pub fn default_device(self) -> RunsOn {
        self.runs_on()[0]
    }

    /// Whether its candidates run on a GPU unless told otherwise (every language but `c`): a
    /// run leases GPUs for it, a Ray cluster gives its evaluations one.
    pub fn gpu_by_default(self) -> bool {
        self.default_device().is_gpu()
    }

    /// Whether its candidates cannot run without a GPU (`cuda`, `triton`): no device it runs on
    /// is a CPU.
    pub fn needs_gpu(self) -> bool {
        self.runs_on().iter().all(|d| d.is_gpu())
    }

    /// How the harness calls its entry point.
    pub fn calling_style(self) -> CallingStyle {
        match self {
            Language::C | Language::Cuda => CallingStyle::DestinationPassing,
            Language::Triton | Language::Python => CallingStyle::PythonModule,
            Language::Mlx => CallingStyle::ReturnsOutputs,
            Language::Cpp | Language::CudaBinding => CallingStyle::Binding,
        }
    }

    /// Whether a candidate is a Python module called per `[kernel].calling` (`triton`,
    /// `python`); its source takes `#` comments.
    pub fn is_python_module(self) -> bool {
        self.calling_style() == CallingStyle::PythonModule
    }

    /// The info string of a Markdown code fence holding its source in a prompt: `c`, `cuda`,
    /// `cpp`, else `python` (Triton, PyTorch and MLX launchers are Python).
    pub fn fence_tag(self) -> &'static str {
        match self {
            Language::C => "c",
            Language::Cuda | Language::CudaBinding => "cuda",
            Language::Cpp => "cpp",
            Language::Triton | Language::Python | Language::Mlx => "python",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Language {
    type Err = UnknownLanguage;

    /// Exactly one of the spellings of [`Language::as_str`].
    fn from_str(s: &str) -> Result<Self, UnknownLanguage> {
        Language::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLanguage { given: s.to_string() })
    }
}

impl Serialize for Language {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_list_the_known() {
        for l in Language::ALL {
            assert_eq!(l.as_str().parse::<Language>(), Ok(l));
            assert_eq!(l.to_string(), l.as_str());
            assert_eq!(Language::of_backend(l.harness_backend()), Some(l));
            assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
        }
        for bad in ["fortran", "C", " c", "c++", "cuda-binding", ""] {
            let e = bad.parse::<Language>().unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "unknown language '{bad}'; expected one of c, cuda, triton, python, mlx, cpp, \
                     cuda_binding"
                )
            );
        }
        let e = serde_json::from_str::<Language>("\"swift\"").unwrap_err().to_string();
        assert!(e.contains("unknown language 'swift'; expected one of c, cuda"), "{e}");
        assert_eq!(Language::of_backend("metal"), None);
    }

    #[test]
    fn devices_and_calling_styles_are_todays() {
        let gpu_by_default: Vec<_> = Language::ALL.into_iter().filter(|l| l.gpu_by_default()).collect();
        assert_eq!(
            gpu_by_default,
            [
                Language::Cuda,
                Language::Triton,
                Language::Python,
                Language::Mlx,
                Language::CudaBinding
            ]
        );
        let needs_gpu: Vec<_> = Language::ALL.into_iter().filter(|l| l.needs_gpu()).collect();
        assert_eq!(needs_gpu, [Language::Cuda, Language::Triton, Language::CudaBinding]);
        assert_eq!(Language::Cpp.default_device(), RunsOn::Cpu);
        assert_eq!(Language::Cpp.calling_style(), CallingStyle::Binding);
        assert_eq!(Language::C.default_device(), RunsOn::Cpu);
        assert_eq!(Language::Python.runs_on(), [RunsOn::CudaGpu, RunsOn::Cpu]);
        assert_eq!(Language::Mlx.default_device(), RunsOn::MlxGpu);
        let modules: Vec<_> = Language::ALL.into_iter().filter(|l| l.is_python_module()).collect();
        assert_eq!(modules, [Language::Triton, Language::Python]);
        assert_eq!(Language::Cuda.calling_style(), CallingStyle::DestinationPassing);
        assert_eq!(Language::Mlx.calling_style(), CallingStyle::ReturnsOutputs);
    }
}
