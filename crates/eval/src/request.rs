//! Which harness backend evaluates a solution, on which device, and the JSON request it gets
//! (docs/protocol.md).

use crate::{CudaGraph, EvalError, EvalOptions};
use ksearch_spec::{Calling, Solution, Task};
use serde_json::json;
use std::time::Duration;

/// The harness backend for a language and the device it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// The harness's backend name (`c`, `cuda`, `triton`, `python`, `mlx`).
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
}

const MLX_GPU: &str = "mlx:gpu";

/// The dialect MLX runs kernels in on this platform.
pub fn mlx_dialect() -> &'static str {
    if cfg!(target_os = "macos") {
        "metal"
    } else {
        "cuda"
    }
}

/// MLX's devices: `mlx:gpu` (default; `mlx` is the same) or `mlx:cpu`.
fn mlx_backend(device: Option<&str>) -> Result<Backend, EvalError> {
    let device = match device.unwrap_or(MLX_GPU) {
        "mlx" | MLX_GPU => MLX_GPU,
        "mlx:cpu" => "mlx:cpu",
        other => {
            return Err(EvalError::UnsupportedDevice {
                backend: "mlx",
                device: other.to_string(),
                expected: "mlx:gpu or mlx:cpu",
            })
        }
    };
    Ok(Backend {
        name: "mlx",
        device: device.to_string(),
    })
}

/// The backend that evaluates `language`, on `device` (`None`: `cpu` for C, `cuda:0` for the
/// CUDA backends, `mlx:gpu` for MLX). The python backend also runs on `cpu` (a CPU-only
/// PyTorch).
pub fn backend_for(language: &str, device: Option<&str>) -> Result<Backend, EvalError> {
    if language == "mlx" {
        return mlx_backend(device);
    }
    let (name, default, cpu_ok, gpu_ok) = match language {
        "c" => ("c", "cpu", true, false),
        "cuda" => ("cuda", "cuda:0", false, true),
        "triton" => ("triton", "cuda:0", false, true),
        "python" => ("python", "cuda:0", true, true),
        other => {
            return Err(EvalError::UnsupportedLanguage {
                language: other.to_string(),
            })
        }
    };
    let device = device.unwrap_or(default).to_string();
    let is_cuda = device == "cuda"
        || device
            .strip_prefix("cuda:")
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    let fits = (device == "cpu" && cpu_ok) || (is_cuda && gpu_ok);
    if !fits {
        let expected = match (cpu_ok, gpu_ok) {
            (true, false) => "cpu",
            (false, true) => "cuda or cuda:N",
            _ => "cpu, cuda or cuda:N",
        };
        return Err(EvalError::UnsupportedDevice {
            backend: name,
            device,
            expected,
        });
    }
    Ok(Backend { name, device })
}

/// How the harness calls a Python-module candidate: C and CUDA are always destination-passing;
/// a Python solution that is not destination-passing uses the task's non-dps convention
/// (`returns` when the task's is `dps`, which a Solution cannot contradict otherwise).
pub(crate) fn calling_for(solution: &Solution, task: &Task) -> &'static str {
    if solution.spec.destination_passing_style {
        return Calling::Dps.name();
    }
    match task.config.kernel.calling {
        Calling::Dps => Calling::Returns.name(),
        other => other.name(),
    }
}

/// The compile step's share of the evaluation's time: nvcc on a large kernel takes longer than
/// a C compiler.
fn compile_timeout(backend: &Backend, timeout: Duration) -> f64 {
    let cap = if backend.name == "cuda" { 120.0 } else { 30.0 };
    timeout.as_secs_f64().min(cap)
}

/// The sanitizer's log, relative to the evaluation's private temp dir (the harness's cwd).
pub(crate) const SANITIZER_LOG: &str = "sanitizer.log";

pub(crate) fn build_request(
    task: &Task,
    solution: &Solution,
    backend: &Backend,
    trials: u32,
    timeout: Duration,
    opts: &EvalOptions,
) -> serde_json::Value {
    let cfg = &task.config;
    let tolerance: serde_json::Map<String, serde_json::Value> = task
        .definition
        .dtypes()
        .into_iter()
        .filter_map(|d| {
            cfg.tolerance_for(d)
                .map(|t| (d.name().to_string(), json!({"atol": t.atol, "rtol": t.rtol})))
        })
        .collect();
    let mut candidate = json!({
        "language": solution.spec.language,
        "sources": solution.sources,
        "entry_point": solution.spec.entry_point,
        "destination_passing_style": solution.spec.destination_passing_style,
        "build": {"openmp": cfg.kernel.openmp, "extra_flags": []},
    });
    let mut timing = json!({
        "warmup": cfg.evaluation.warmup,
        "iterations": cfg.evaluation.iterations,
        "min_iterations": cfg.evaluation.min_iterations,
        "max_seconds": cfg.evaluation.max_timing_s,
    });
    // MLX candidates return their outputs (MLX allocates them) and are compiled by MLX itself:
    // the calling convention, nvcc's arch, the build cache and CUDA graphs do not apply.
    if backend.name != "c" && backend.name != "mlx" {
        candidate["calling"] = json!(calling_for(solution, task));
        candidate["init"] = json!(cfg.kernel.init);
        // The task's module folders, absolute: the harness runs in a temp dir of its own.
        if !cfg.kernel.python_path.is_empty() {
            let base = task.dir().map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf()));
            let paths: Vec<String> = cfg
                .kernel
                .python_path
                .iter()
                .map(|p| match &base {
                    Some(b) => b.join(p).display().to_string(),
                    None => p.clone(),
                })
                .collect();
            candidate["python_path"] = json!(paths);
        }
        candidate["build"]["arch"] = json!(opts.arch);
        candidate["build"]["cache_dir"] = json!(opts.build_cache);
        timing["cuda_graph"] = match opts.cuda_graph {
            CudaGraph::Auto => json!("auto"),
            CudaGraph::On => json!(true),
            CudaGraph::Off => json!(false),
        };
    }
    let mut device = json!({"backend": backend.name, "name": backend.device});
    if let Some(dialect) = backend.dialect() {
        device["dialect"] = json!(dialect);
    }
    json!({
        "protocol": 1,
        "mode": "evaluate",
        "task_dir": task.dir().map(|d| d.canonicalize().unwrap_or_else(|_| d.to_path_buf())),
        "definition": task.definition,
        "workloads": task.workloads,
        "candidate": candidate,
        "device": device,
        "seed": opts.seed,
        "correctness": {
            "trials": trials,
            "distributions": cfg.evaluation.distributions,
            "input_overrides": cfg.inputs,
            "tolerance": tolerance,
            "matched_ratio": cfg.evaluation.matched_ratio,
            "writable_inputs": cfg.kernel.writable_inputs,
        },
        "timing": timing,
        "limits": {"log_bytes": 65536, "compile_timeout_s": compile_timeout(backend, timeout)},
        "fail_fast": opts.fail_fast,
        "sanitize": if opts.sanitize { json!({"tool": "memcheck", "log": SANITIZER_LOG}) } else { json!(null) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_spec::{BuildSpec, SourceFile};
    use std::path::Path;

    fn task(language: &str, extra: &str) -> (tempfile::TempDir, Task) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("definition.json"),
            r#"{"name": "t", "op_type": "x", "axes": {"N": {"type": "var"}},
                "inputs": {"x": {"shape": ["N"], "dtype": "bfloat16"}},
                "outputs": {"y": {"shape": ["N"], "dtype": "bfloat16"}},
                "reference": "import torch\ndef run(x):\n    return x * 2\n"}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("workloads.jsonl"),
            "{\"uuid\": \"a\", \"axes\": {\"N\": 4}}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("task.toml"),
            format!("targets = [\"cuda\"]\n[kernel]\nlanguage = \"{language}\"\nentry = \"k\"\n{extra}"),
        )
        .unwrap();
        let task = Task::load_folder(dir.path()).unwrap();
        (dir, task)
    }

    fn solution(language: &str, file: &str, dps: bool) -> Solution {
        Solution {
            name: file.into(),
            definition: "t".into(),
            author: None,
            spec: BuildSpec {
                language: language.into(),
                target_hardware: vec![],
                entry_point: format!("{file}::k"),
                dependencies: vec![],
                destination_passing_style: dps,
            },
            sources: vec![SourceFile {
                path: file.into(),
                content: String::new(),
            }],
            description: None,
        }
    }

    fn request(language: &str, file: &str, dps: bool, extra: &str, opts: &EvalOptions) -> serde_json::Value {
        let (_dir, task) = task(language, extra);
        let backend = backend_for(language, opts.device.as_deref()).unwrap();
        build_request(
            &task,
            &solution(language, file, dps),
            &backend,
            3,
            Duration::from_secs(60),
            opts,
        )
    }

    #[test]
    fn backends_and_devices() {
        let b = |l: &str, d: Option<&str>| backend_for(l, d).map(|b| (b.name, b.device.clone(), b.on_gpu()));
        assert_eq!(b("c", None).unwrap(), ("c", "cpu".to_string(), false));
        assert_eq!(b("cuda", None).unwrap(), ("cuda", "cuda:0".to_string(), true));
        assert_eq!(
            b("triton", Some("cuda:1")).unwrap(),
            ("triton", "cuda:1".to_string(), true)
        );
        assert_eq!(b("python", None).unwrap(), ("python", "cuda:0".to_string(), true));
        assert_eq!(b("python", Some("cpu")).unwrap(), ("python", "cpu".to_string(), false));
        for (language, device) in [
            ("c", "cuda:0"),
            ("cuda", "cpu"),
            ("triton", "cpu"),
            ("cuda", "cuda:x"),
            ("python", "gpu"),
        ] {
            let err = backend_for(language, Some(device)).unwrap_err().to_string();
            assert!(err.contains(device), "{language} {device}: {err}");
        }
        assert_eq!(b("mlx", None).unwrap(), ("mlx", "mlx:gpu".to_string(), true));
        assert_eq!(b("mlx", Some("mlx")).unwrap(), ("mlx", "mlx:gpu".to_string(), true));
        assert_eq!(
            b("mlx", Some("mlx:cpu")).unwrap(),
            ("mlx", "mlx:cpu".to_string(), false)
        );
        for device in ["cuda:0", "cpu", "mlx:metal", ""] {
            let err = backend_for("mlx", Some(device)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("'{device}'")) && err.contains("mlx:gpu or mlx:cpu"),
                "{device}: {err}"
            );
        }
        assert!(matches!(
            backend_for("fortran", None),
            Err(EvalError::UnsupportedLanguage { .. })
        ));
    }

    #[test]
    fn mlx_requests_carry_the_dialect_and_no_cuda_settings() {
        let mut opts = EvalOptions::new(7);
        opts.arch = Some("sm_90a".into());
        let r = request("mlx", "launch.toml", true, "", &opts);
        let dialect = if cfg!(target_os = "macos") { "metal" } else { "cuda" };
        assert_eq!(
            r["device"],
            json!({"backend": "mlx", "name": "mlx:gpu", "dialect": dialect})
        );
        assert_eq!(r["candidate"]["language"], "mlx");
        assert_eq!(r["candidate"]["entry_point"], "launch.toml::k");
        assert_eq!(r["candidate"]["build"], json!({"openmp": false, "extra_flags": []}));
        for absent in ["calling", "init"] {
            assert!(r["candidate"].get(absent).is_none(), "{absent}: {r}");
        }
        assert!(r["timing"].get("cuda_graph").is_none());
        assert_eq!(r["limits"]["compile_timeout_s"], json!(30.0));
        // On MLX's CPU device only launchers run: no kernel dialect is sent.
        opts.device = Some("mlx:cpu".into());
        let r = request("mlx", "launcher.py", false, "", &opts);
        assert_eq!(r["device"], json!({"backend": "mlx", "name": "mlx:cpu"}));
    }

    #[test]
    fn c_requests_keep_their_shape() {
        let (_dir, task) = task("c", "");
        let opts = EvalOptions::new(7);
        let backend = backend_for("c", None).unwrap();
        let r = build_request(
            &task,
            &solution("c", "k.c", true),
            &backend,
            3,
            Duration::from_secs(60),
            &opts,
        );
        assert_eq!(r["device"], json!({"backend": "c", "name": "cpu"}));
        assert_eq!(r["candidate"]["build"], json!({"openmp": false, "extra_flags": []}));
        assert!(r["candidate"].get("calling").is_none());
        assert!(r["timing"].get("cuda_graph").is_none());
        assert_eq!(r["sanitize"], json!(null));
        assert_eq!(r["limits"]["compile_timeout_s"], json!(30.0));
    }

    #[test]
    fn cuda_requests_carry_arch_cache_graphs_and_sanitizer() {
        let mut opts = EvalOptions::new(7);
        opts.arch = Some("sm_90a".into());
        opts.build_cache = Some("/cache/cuda-build".into());
        opts.sanitize = true;
        opts.cuda_graph = CudaGraph::Off;
        let r = request("cuda", "k.cu", true, "", &opts);
        assert_eq!(r["device"], json!({"backend": "cuda", "name": "cuda:0"}));
        assert_eq!(r["candidate"]["language"], "cuda");
        assert_eq!(r["candidate"]["calling"], "dps");
        assert_eq!(r["candidate"]["build"]["arch"], "sm_90a");
        assert_eq!(r["candidate"]["build"]["cache_dir"], "/cache/cuda-build");
        assert_eq!(r["timing"]["cuda_graph"], json!(false));
        assert_eq!(r["sanitize"], json!({"tool": "memcheck", "log": "sanitizer.log"}));
        assert_eq!(r["limits"]["compile_timeout_s"], json!(60.0));
        let r = request("cuda", "k.cu", true, "", &EvalOptions::new(7));
        assert_eq!(
            r["candidate"]["build"]["arch"],
            json!(null),
            "the harness asks the device"
        );
        assert_eq!(r["timing"]["cuda_graph"], "auto");
    }

    #[test]
    fn python_requests_carry_the_calling_convention_and_init() {
        let opts = EvalOptions::new(7);
        let r = request(
            "python",
            "m.py",
            false,
            "calling = \"tuple\"\ninit = { args = [4, 2.5], seed = 42 }\n",
            &opts,
        );
        assert_eq!(r["device"], json!({"backend": "python", "name": "cuda:0"}));
        assert_eq!(r["candidate"]["calling"], "tuple");
        assert_eq!(r["candidate"]["init"], json!({"args": [4, 2.5], "seed": 42}));
        // Dropout turned off reaches the harness, which puts the candidate's dropout in eval mode.
        let r = request(
            "python",
            "m.py",
            false,
            "calling = \"returns\"\ninit = { args = [], seed = 42, eval_dropout = true }\n",
            &opts,
        );
        assert_eq!(
            r["candidate"]["init"],
            json!({"args": [], "seed": 42, "eval_dropout": true})
        );
        assert!(r["candidate"].get("python_path").is_none());
        // The task's module folders reach the harness as absolute paths inside the task folder.
        let r = request("python", "m.py", false, "python_path = [\"modules\"]\n", &opts);
        let paths = r["candidate"]["python_path"].as_array().unwrap();
        let task_dir = r["task_dir"].as_str().unwrap();
        assert_eq!(paths.len(), 1);
        let path = paths[0].as_str().unwrap();
        assert!(
            Path::new(path).is_absolute() && path == format!("{task_dir}/modules"),
            "{path}"
        );
        let r = request("triton", "m.py", true, "", &opts);
        assert_eq!(r["device"]["backend"], "triton");
        assert_eq!(r["candidate"]["calling"], "dps");
        assert_eq!(r["candidate"]["init"], json!(null));
        // A solution that is not destination-passing, for a task whose default is dps.
        let r = request("triton", "m.py", false, "", &opts);
        assert_eq!(r["candidate"]["calling"], "returns");
        let mut on_cpu = EvalOptions::new(7);
        on_cpu.device = Some("cpu".into());
        let r = request("python", "m.py", false, "calling = \"returns\"\n", &on_cpu);
        assert_eq!(r["device"], json!({"backend": "python", "name": "cpu"}));
    }
}
