//! The GPU tasks' kernel templates render and build for every valid knob assignment the tuner
//! could choose, without a GPU: what the tuner would send to the H200 is at least well-formed.
//!
//! CUDA templates: every valid assignment on the task's hardware (the H200) renders; a sample
//! (the defaults, then each knob moved alone to each of its values, kept when valid) is compiled
//! by nvcc for sm_90a (`-c`, the backend's optimisation and ptxas flags), so a template change
//! that breaks one knob value fails here rather than on a lent GPU. Triton templates: every
//! valid assignment renders to Python that parses.
//!
//! nvcc and python3 are found as the harness finds them (harness/ksearch_harness/backends/
//! cuda/nvcc.py, asked through python3). Without nvcc the CUDA builds are skipped with a printed
//! reason, unless KSEARCH_REQUIRE_NVCC=1 (CI) makes that a failure.

use indexmap::IndexMap;
use ksearch_kb::{Kb, FIGURE_META};
use ksearch_search::tuner::Tuner;
use ksearch_spec::{builtin_names, Assignment, Task};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn h200() -> IndexMap<String, f64> {
    let kb = Kb::builtin().expect("the built-in knowledge base loads");
    let spec = kb.hardware("h200").expect("the kb has the H200");
    FIGURE_META
        .iter()
        .filter_map(|m| spec.figures.get(m.key).map(|f| (m.key.to_string(), f.value)))
        .collect()
}

/// Built-in tasks whose kernel template renders to `extension` sources.
fn templated(extension: &str) -> Vec<(Task, Tuner)> {
    builtin_names()
        .into_iter()
        .filter_map(|name| {
            let task = Task::load_builtin(&name).unwrap_or_else(|e| panic!("built-in task '{name}': {e}"));
            let template = task.template.clone()?;
            if !template.file.ends_with(extension) || task.config.kernel.language == ksearch_spec::Language::C {
                return None;
            }
            let tuner = Tuner::new(template, h200(), HashMap::new())
                .unwrap_or_else(|e| panic!("{name}: the template's tuner: {e}"));
            Some((task, tuner))
        })
        .collect()
}

fn valid(tuner: &Tuner, task: &Task) -> Vec<Assignment> {
    let template = task.template.as_ref().unwrap();
    let all = template.space.enumerate_valid(&h200(), 100_000);
    assert!(!all.is_empty(), "{}: no valid assignment", task.definition.name);
    for a in &all {
        tuner
            .render(a)
            .unwrap_or_else(|e| panic!("{}: {e}", task.definition.name));
    }
    all
}

fn nvcc() -> Option<String> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys; sys.path.insert(0, 'harness'); from ksearch_harness.backends.cuda import nvcc; print(nvcc.find() or '')",
        ])
        .current_dir(root())
        .output()
        .ok()?;
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!found.is_empty()).then_some(found)
}

#[test]
fn cuda_templates_render_everywhere_and_a_sample_builds_for_sm_90a() {
    let tasks = templated(".cu");
    assert!(
        tasks.iter().any(|(t, _)| t.definition.name == "mamba_scan"),
        "mamba_scan has a CUDA template"
    );
    let nvcc = match nvcc() {
        Some(n) => Some(n),
        None if std::env::var("KSEARCH_REQUIRE_NVCC").as_deref() == Ok("1") => {
            panic!("KSEARCH_REQUIRE_NVCC=1 but the harness finds no nvcc (pip install nvidia-cuda-nvcc)")
        }
        None => {
            eprintln!(
                "skipping the nvcc builds: no nvcc (pip install nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-cccl)"
            );
            None
        }
    };
    for (task, tuner) in &tasks {
        let name = &task.definition.name;
        let all = valid(tuner, task);
        let Some(nvcc) = &nvcc else { continue };
        // The defaults, then each knob alone at each of its values.
        let template = task.template.as_ref().unwrap();
        let default = template.space.default_assignment();
        let mut sample = vec![default.clone()];
        for knob in &template.space.knobs {
            for a in &all {
                let differs: Vec<&String> = a.keys().filter(|k| a.get(*k) != default.get(*k)).collect();
                if differs == [&knob.name] && !sample.contains(a) {
                    sample.push(a.clone());
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        for (i, a) in sample.iter().enumerate() {
            let source = dir.path().join(format!("k{i}.cu"));
            std::fs::write(&source, tuner.render(a).unwrap()).unwrap();
            let out = Command::new(nvcc)
                .args([
                    "-O3",
                    "-gencode",
                    "arch=compute_90a,code=[sm_90a,compute_90a]",
                    "-Xcompiler",
                    "-fPIC",
                    "-Xptxas",
                    "-v",
                    "-c",
                    "-o",
                ])
                .arg(dir.path().join(format!("k{i}.o")))
                .arg(&source)
                .output()
                .expect("nvcc runs");
            assert!(
                out.status.success(),
                "{name}: the template does not build for {}:\n{}",
                serde_json::to_string(a).unwrap(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!(
            "{name}: {} valid assignments render; {} built with nvcc",
            all.len(),
            sample.len()
        );
    }
}

#[test]
fn triton_templates_render_to_python_that_parses_for_every_valid_assignment() {
    let tasks = templated(".py");
    assert!(
        tasks.iter().any(|(t, _)| t.definition.name == "attention_prefill"),
        "attention_prefill has a Triton template"
    );
    for (task, tuner) in &tasks {
        let dir = tempfile::tempdir().unwrap();
        let all = valid(tuner, task);
        for (i, a) in all.iter().enumerate() {
            std::fs::write(dir.path().join(format!("k{i}.py")), tuner.render(a).unwrap()).unwrap();
        }
        // One interpreter parses them all (ast.parse runs none of their code).
        let out = Command::new("python3")
            .arg("-c")
            .arg("import ast, pathlib, sys\nfor p in sorted(pathlib.Path(sys.argv[1]).glob('*.py')):\n    ast.parse(p.read_text(), str(p))\nprint('ok')")
            .arg(dir.path())
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}: a rendered kernel does not parse:\n{}",
            task.definition.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
