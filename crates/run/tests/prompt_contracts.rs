//! The planner's and coder's prompts of every built-in task state the contract of the task's own
//! backend (calling convention, device, build command) and no other backend's; the CPU tasks'
//! prompts name this machine's detected figures.

use ksearch_kb::ContextLevel;
use ksearch_run::knowledge::host::HostCpu;
use ksearch_run::knowledge::{brief_for, kb, Platform};
use ksearch_search::engine::{Engine, EngineConfig, EvalSummary, Event, Request, TaskBrief};
use ksearch_spec::Task;
use serde_json::json;

/// The planner's first prompt and the coder's first prompt for `brief`: the seed is measured at
/// 1x, the planner adds one action, and the coder is asked to implement it.
fn prompts(brief: TaskBrief) -> (String, String) {
    let mut engine = Engine::new();
    engine
        .apply(&Event::Started {
            task: brief,
            config: EngineConfig::default(),
        })
        .unwrap();
    let text = |messages: &[ksearch_llm::Message]| messages.iter().map(|m| m.content.clone()).collect::<String>();
    let mut planner: Option<String> = None;
    for round in 0..8 {
        let event = match engine.pending().cloned().expect("a request") {
            Request::Evaluate { id, candidate_id, .. } => Event::Evaluated {
                request_id: id,
                candidate_id,
                summary: EvalSummary {
                    status: "passed".into(),
                    reason: None,
                    speedup: Some(1.0),
                    relative_noise: Some(0.01),
                    workloads: vec![],
                    log_tail: String::new(),
                    suspicious: None,
                    resources: vec![],
                    profile: None,
                    harness: None,
                },
            },
            Request::Plan { id, messages, .. } => {
                planner.get_or_insert_with(|| text(&messages));
                let action = json!({"op": "insert_node", "node": {"node_id": format!("a{round}"), "parent_id": "root",
                    "decision": "tiling", "choice": "tile it", "overall_rating": 6, "confidence": 0.5,
                    "action": {"title": "tile", "description": "tile the loops", "rationale": "reuse",
                               "difficulty": 2, "score": 0.8}}});
                Event::PlannerAnswered {
                    request_id: id,
                    text: json!({"kernel_summary": "naive", "ops": [action]}).to_string(),
                }
            }
            Request::Code { messages, .. } => {
                return (planner.expect("the planner was asked first"), text(&messages));
            }
            Request::Finished { .. } => panic!("finished before the coder was asked"),
        };
        engine.apply(&event).unwrap();
    }
    panic!("the coder was never asked")
}

/// The prompt's "Calling convention" section.
fn convention_section(prompt: &str, language: &str) -> String {
    let head = format!("## Calling convention ({language})\n");
    let start = prompt.find(&head).unwrap_or_else(|| panic!("no {head:?} in\n{prompt}"));
    let rest = &prompt[start + head.len()..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// What each backend's contract says, and what only that backend's says.
fn markers(language: &str, task: &Task) -> Vec<String> {
    let entry = task.config.kernel.entry.clone().unwrap();
    match language {
        "c" => vec![
            format!("void {entry}("),
            "-march=native".into(),
            "-std=c11 -ffp-contract=fast".into(),
            "SOURCES.c -lm".into(),
            "FMA contraction is on".into(),
            "pointers to contiguous row-major host memory".into(),
        ],
        "cuda" => vec![
            format!("extern \"C\" void {entry}("),
            "an `extern \"C\"` host function".into(),
            "device pointers".into(),
            "default stream".into(),
            "nvcc -O3 -gencode arch=compute_90a,code=[sm_90a,compute_90a] -Xcompiler -fPIC -Xptxas -v -lineinfo".into(),
            "-shared -Xlinker -z,defs".into(),
            "(sm_90a), one GPU; every pointer is device memory".into(),
        ],
        "mlx" => vec![
            "launch spec".into(),
            "mx.fast.cuda_kernel".into(),
            "MLX compiles the body at its first call (NVRTC)".into(),
        ],
        "triton" => vec![
            "@triton.jit".into(),
            "Triton compiles each @triton.jit kernel for sm_90a".into(),
            format!("def {entry}("),
        ],
        "python" => vec![
            "A Python module of PyTorch code".into(),
            format!("def {entry}("),
            "only checks the syntax".into(),
        ],
        other => panic!("no markers for {other}"),
    }
}

/// Phrases that belong to one backend only: none may appear in another's contract.
const OWN: &[(&str, &str)] = &[
    ("c", "-march=native"),
    ("c", "SOURCES.c"),
    ("c", "C11"),
    ("c", "host memory"),
    ("cuda", "extern \"C\""),
    ("cuda", "nvcc"),
    ("cuda", "device pointers"),
    ("mlx", "mx.fast"),
    ("mlx", "launch spec"),
    ("triton", "@triton.jit"),
    ("python", "PyTorch code"),
];

fn check(name: &str, task: &Task, brief: TaskBrief) {
    let language = task.config.kernel.language.as_str();
    let (planner, coder) = prompts(brief);
    for (role, prompt) in [("planner", &planner), ("coder", &coder)] {
        let section = convention_section(prompt, language);
        for m in markers(language, task) {
            assert!(section.contains(&m), "{name} ({role}): {m:?} missing from\n{section}");
        }
        for (owner, phrase) in OWN {
            if *owner != language {
                assert!(
                    !section.contains(phrase),
                    "{name} ({role}, {language}): {phrase:?} is {owner}'s, in\n{section}"
                );
            }
        }
    }
}

#[test]
fn every_builtin_tasks_prompts_state_its_own_backends_contract() {
    let kb = kb().unwrap();
    let names = ksearch_spec::builtin_names();
    assert!(names.len() >= 12, "{names:?}");
    let mut languages = std::collections::BTreeSet::new();
    for name in names {
        let task = Task::load_builtin(&name).unwrap();
        languages.insert(task.config.kernel.language.as_str());
        for level in [ContextLevel::None, ContextLevel::Full] {
            let brief = brief_for(&kb, &task, Platform::Linux, level).unwrap();
            check(&name, &task, brief);
        }
    }
    assert_eq!(languages.into_iter().collect::<Vec<_>>(), ["c", "cuda", "mlx"]);
}

/// A GPU task whose kernels are written in `language` (`triton`, `python`), from the built-in
/// softmax_llm's definition and workloads.
fn python_module_task(dir: &std::path::Path, language: &str, calling: &str) -> Task {
    for (path, bytes) in ksearch_spec::builtin_task_files("softmax_llm").unwrap() {
        if path == "definition.json" || path == "workloads.jsonl" {
            std::fs::write(dir.join(path), bytes).unwrap();
        }
    }
    std::fs::write(
        dir.join("task.toml"),
        format!(
            "targets = [\"h200\"]\n[kernel]\nlanguage = \"{language}\"\nentry = \"softmax\"\ncalling = \"{calling}\"\n"
        ),
    )
    .unwrap();
    Task::load_folder(dir).unwrap()
}

#[test]
fn triton_and_python_tasks_get_their_backends_contracts() {
    let kb = kb().unwrap();
    for (language, calling, call) in [
        ("triton", "returns", "def softmax(logits)"),
        ("python", "dps", "def softmax(logits, probs, batch_size, vocab_size)"),
        ("python", "tuple", "def softmax((logits,))"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let task = python_module_task(dir.path(), language, calling);
        let brief = brief_for(&kb, &task, Platform::Linux, ContextLevel::Hardware).unwrap();
        assert!(brief.convention.starts_with(call), "{}", brief.convention);
        assert_eq!(brief.default_file, "kernel.py");
        check(language, &task, brief);
    }
}

#[test]
fn a_cpu_tasks_prompt_names_this_machines_figures() {
    let kb = kb().unwrap();
    let host = HostCpu::here();
    let task = Task::load_builtin("matmul").unwrap();
    let brief = brief_for(&kb, &task, Platform::current(), ContextLevel::Hardware).unwrap();
    let (planner, coder) = prompts(brief);
    println!("{planner}");
    for prompt in [&planner, &coder] {
        assert!(
            prompt.contains("These figures are of the machine that built this brief"),
            "{prompt}"
        );
        assert!(!prompt.contains("exists on some CPUs only"), "{prompt}");
        if let Some((bits, _)) = host.vector() {
            assert!(prompt.contains(&format!("vector registers {bits}-bit")), "{prompt}");
            assert!(
                prompt.contains(&format!("{} fp32 lanes per vector", bits / 32)),
                "{prompt}"
            );
        }
        if let Some(kb) = host.caches.l1d_kb {
            assert!(prompt.contains(&format!("L1d {kb} KB/core")), "{prompt}");
        }
        if let Some(cores) = host.cores {
            assert!(prompt.contains(&format!("- {cores} core")), "{prompt}");
        }
        if let Some(model) = &host.model {
            assert!(
                prompt.contains(&format!("## Target hardware: {}, this machine", model.trim())),
                "{prompt}"
            );
        }
        if let Some(probe) = &host.compiler {
            assert!(prompt.contains(&probe.version), "{prompt}");
        }
    }
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let has = |flag: &str| cpuinfo.split_whitespace().any(|w| w == flag);
        assert_eq!(planner.contains("AVX-512 F/"), has("avx512f"), "{planner}");
        assert_eq!(planner.contains("AVX2"), has("avx2"), "{planner}");
    }
}
