//! The JSON request the harness gets for an evaluation (docs/protocol.md): the fields every
//! backend shares, then each backend's own ([`crate::backend`]).

use crate::backend::{Backend, RequestParts};
use crate::EvalOptions;
use ksearch_spec::{Calling, Solution, Task};
use serde_json::json;
use std::time::Duration;

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

/// The compile step's share of the evaluation's time, capped by the backend (nvcc on a large
/// kernel takes longer than a C compiler).
fn compile_timeout(backend: &Backend, timeout: Duration) -> f64 {
    timeout.as_secs_f64().min(backend.rules().compile_cap_s())
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
    backend.rules().extend_request(&mut RequestParts {
        task,
        solution,
        opts,
        candidate: &mut candidate,
        timing: &mut timing,
    });
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
    use crate::backend::backend_for;
    use crate::CudaGraph;
    use ksearch_spec::{BuildSpec, Language, SourceFile};
    use std::path::Path;
    use Language::{Cuda, Mlx, Python, Triton, C};

    fn task(language: Language, extra: &str) -> (tempfile::TempDir, Task) {
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

    fn solution(language: Language, file: &str, dps: bool) -> Solution {
        Solution {
            name: file.into(),
            definition: "t".into(),
            author: None,
            spec: BuildSpec {
                language,
                target_hardware: vec![],
                entry_point: format!("{file}::k"),
                dependencies: vec![],
                destination_passing_style: dps,
                binding: None,
            },
            sources: vec![SourceFile {
                path: file.into(),
                content: String::new(),
            }],
            description: None,
        }
    }

    fn request(language: Language, file: &str, dps: bool, extra: &str, opts: &EvalOptions) -> serde_json::Value {
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
    fn mlx_requests_carry_the_dialect_and_no_cuda_settings() {
        let mut opts = EvalOptions::new(7);
        opts.arch = Some("sm_90a".into());
        let r = request(Mlx, "launch.toml", true, "", &opts);
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
        let r = request(Mlx, "launcher.py", false, "", &opts);
        assert_eq!(r["device"], json!({"backend": "mlx", "name": "mlx:cpu"}));
    }

    #[test]
    fn c_requests_keep_their_shape() {
        let (_dir, task) = task(C, "");
        let opts = EvalOptions::new(7);
        let backend = backend_for(C, None).unwrap();
        let r = build_request(
            &task,
            &solution(C, "k.c", true),
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
        let r = request(Cuda, "k.cu", true, "", &opts);
        assert_eq!(r["device"], json!({"backend": "cuda", "name": "cuda:0"}));
        assert_eq!(r["candidate"]["language"], "cuda");
        assert_eq!(r["candidate"]["calling"], "dps");
        assert_eq!(r["candidate"]["build"]["arch"], "sm_90a");
        assert_eq!(r["candidate"]["build"]["cache_dir"], "/cache/cuda-build");
        assert_eq!(r["timing"]["cuda_graph"], json!(false));
        assert_eq!(r["sanitize"], json!({"tool": "memcheck", "log": "sanitizer.log"}));
        assert_eq!(r["limits"]["compile_timeout_s"], json!(60.0));
        let r = request(Cuda, "k.cu", true, "", &EvalOptions::new(7));
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
            Python,
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
            Python,
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
        let r = request(Python, "m.py", false, "python_path = [\"modules\"]\n", &opts);
        let paths = r["candidate"]["python_path"].as_array().unwrap();
        let task_dir = r["task_dir"].as_str().unwrap();
        assert_eq!(paths.len(), 1);
        let path = paths[0].as_str().unwrap();
        assert!(
            Path::new(path).is_absolute() && path == format!("{task_dir}/modules"),
            "{path}"
        );
        let r = request(Triton, "m.py", true, "", &opts);
        assert_eq!(r["device"]["backend"], "triton");
        assert_eq!(r["candidate"]["calling"], "dps");
        assert_eq!(r["candidate"]["init"], json!(null));
        // A solution that is not destination-passing, for a task whose default is dps.
        let r = request(Triton, "m.py", false, "", &opts);
        assert_eq!(r["candidate"]["calling"], "returns");
        let mut on_cpu = EvalOptions::new(7);
        on_cpu.device = Some("cpu".into());
        let r = request(Python, "m.py", false, "calling = \"returns\"\n", &on_cpu);
        assert_eq!(r["device"], json!({"backend": "python", "name": "cpu"}));
    }
}
