//! The CPU tasks' kernel templates render for every valid knob assignment the tuner could choose
//! on the generic CPU, and a sample of them compiles with the system C compiler under the C
//! backend's flags (harness/ksearch_harness/backends/c/build.py) plus -fopenmp where the task enables
//! it: a template change that breaks one knob value, or a misspelt pragma, fails here rather than
//! as a compile error in the middle of a search.
//!
//! The sample: the defaults, each knob alone at each of its values, and every k-th assignment of
//! the whole space (k chosen for about 16), so knob combinations are covered too.

use indexmap::IndexMap;
use ksearch_kb::{Kb, FIGURE_META};
use ksearch_search::tuner::Tuner;
use ksearch_spec::{builtin_names, Assignment, Task};
use std::collections::HashMap;
use std::process::Command;

fn generic_cpu() -> IndexMap<String, f64> {
    let kb = Kb::builtin().expect("the built-in knowledge base loads");
    let spec = kb.hardware("cpu-generic").expect("the kb has the generic CPU");
    FIGURE_META
        .iter()
        .filter_map(|m| spec.figures.get(m.key).map(|f| (m.key.to_string(), f.value)))
        .collect()
}

fn sample(task: &Task, all: &[Assignment]) -> Vec<Assignment> {
    let template = task.template.as_ref().unwrap();
    let default = template.space.default_assignment();
    let mut picked = vec![default.clone()];
    for knob in &template.space.knobs {
        for a in all {
            let differs: Vec<&String> = a.keys().filter(|k| a.get(*k) != default.get(*k)).collect();
            if differs == [&knob.name] && !picked.contains(a) {
                picked.push(a.clone());
            }
        }
    }
    let stride = (all.len() / 16).max(1);
    for a in all.iter().step_by(stride) {
        if !picked.contains(a) {
            picked.push(a.clone());
        }
    }
    picked
}

#[test]
fn cpu_templates_render_everywhere_and_a_sample_compiles() {
    let hw = generic_cpu();
    let mut seen = Vec::new();
    for name in builtin_names() {
        let task = Task::load_builtin(&name).unwrap_or_else(|e| panic!("built-in task '{name}': {e}"));
        let Some(template) = task.template.clone() else {
            continue;
        };
        if task.config.kernel.language != ksearch_spec::Language::C {
            continue;
        }
        let tuner = Tuner::new(template.clone(), hw.clone(), HashMap::new())
            .unwrap_or_else(|e| panic!("{name}: the template's tuner: {e}"));
        let all = template.space.enumerate_valid(&hw, 100_000);
        assert!(!all.is_empty(), "{name}: no valid assignment");
        for a in &all {
            tuner.render(a).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let openmp = task.config.kernel.openmp;
        let picked = sample(&task, &all);
        let dir = tempfile::tempdir().unwrap();
        for (i, a) in picked.iter().enumerate() {
            let source = dir.path().join(format!("k{i}.c"));
            std::fs::write(&source, tuner.render(a).unwrap()).unwrap();
            let mut cc = Command::new("cc");
            cc.args(["-O1", "-march=native", "-fPIC", "-std=c11", "-c"])
                // What would make a kernel silently wrong or slow rather than fail to build.
                .args([
                    "-Werror=implicit-function-declaration",
                    "-Werror=incompatible-pointer-types",
                    "-Werror=unknown-pragmas",
                    "-Werror=int-conversion",
                ]);
            if openmp {
                cc.arg("-fopenmp");
            }
            let out = cc
                .arg("-o")
                .arg(dir.path().join(format!("k{i}.o")))
                .arg(&source)
                .output()
                .expect("cc runs");
            assert!(
                out.status.success(),
                "{name}: the template does not compile for {}:\n{}",
                serde_json::to_string(a).unwrap(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!(
            "{name}: {} valid assignments render; {} compiled (openmp: {openmp})",
            all.len(),
            picked.len()
        );
        seen.push(name);
    }
    for expected in ["softmax", "rmsnorm", "matmul", "ssm_scan"] {
        assert!(seen.iter().any(|n| n == expected), "{expected} has a C template");
    }
}
