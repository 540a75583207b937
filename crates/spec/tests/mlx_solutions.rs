//! Solutions in language `mlx` (docs/mlx.md): what the spec crate checks before the harness
//! does (the entry is a launch spec or a launcher, a spec parses, the files it names are there),
//! and the built-in MLX tasks, whose seeds are launch specs.

use ksearch_spec::{BuildSpec, Language, Solution, SourceFile, Task};

const DEFINITION: &str = r#"{"name": "scale", "op_type": "elementwise",
    "axes": {"N": {"type": "var"}},
    "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["N"], "dtype": "float32"}},
    "reference": "import mlx.core as mx\ndef run(x):\n    return x * 2\n"}"#;

fn mlx_task() -> (tempfile::TempDir, Task) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("definition.json"), DEFINITION).unwrap();
    std::fs::write(
        dir.path().join("workloads.jsonl"),
        "{\"uuid\": \"a\", \"axes\": {\"N\": 8}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("task.toml"),
        "[kernel]\nlanguage = \"mlx\"\nentry = \"scale\"\n",
    )
    .unwrap();
    let task = Task::load_folder(dir.path()).unwrap();
    (dir, task)
}

fn solution(entry: &str, files: &[(&str, &str)]) -> Solution {
    Solution {
        name: "s".into(),
        definition: "scale".into(),
        author: None,
        spec: BuildSpec {
            language: Language::Mlx,
            target_hardware: vec![],
            entry_point: entry.into(),
            dependencies: vec![],
            destination_passing_style: false,
            binding: None,
        },
        sources: files
            .iter()
            .map(|(p, c)| SourceFile {
                path: p.to_string(),
                content: c.to_string(),
            })
            .collect(),
        description: None,
    }
}

fn problems(sol: &Solution, task: &Task) -> String {
    match sol.validate("sol.json", task) {
        Ok(()) => String::new(),
        Err(e) => e.to_string(),
    }
}

const SPEC: &str =
    "grid = [\"N\"]\nthreadgroup = [64]\n[cuda]\nsource_file = \"k.cu\"\n[metal]\nsource = \"y[0] = x[0];\"\n";

#[test]
fn bare_files_of_an_mlx_task_are_mlx_solutions() {
    let (_dir, task) = mlx_task();
    for (file, content) in [
        (
            "launch.toml",
            SPEC.replace("source_file = \"k.cu\"", "source = \"y[0] = 2 * x[0];\""),
        ),
        ("launcher.py", "def scale(x):\n    return x * 2\n".into()),
    ] {
        let sol = Solution::from_source(file, file, content.to_string(), &task).unwrap();
        assert_eq!(sol.spec.language, Language::Mlx, "{file}");
        assert_eq!(sol.spec.entry_point, format!("{file}::scale"));
        assert!(
            !sol.spec.destination_passing_style,
            "MLX candidates return their outputs"
        );
    }
    assert_eq!(ksearch_spec::language_of_in("k.toml", Language::C), None);
    assert_eq!(
        ksearch_spec::language_of_in("k.py", Language::Cuda),
        Some(Language::Triton)
    );
}

#[test]
fn launch_specs_are_checked_for_their_files() {
    let (_dir, task) = mlx_task();
    let good = solution("launch.toml::scale", &[("launch.toml", SPEC), ("k.cu", "y[0] = x[0];")]);
    assert_eq!(problems(&good, &task), "");
    let json = solution(
        "spec.json::scale",
        &[(
            "spec.json",
            r#"{"grid": [1], "threadgroup": [1], "cuda": {"source": "y[0] = x[0];"}}"#,
        )],
    );
    assert_eq!(problems(&json, &task), "");
    for (sol, expected) in [
        (
            solution("launch.toml::scale", &[("launch.toml", SPEC)]),
            "sources.launch.toml: cuda.source_file = \"k.cu\" is not among the solution's other sources",
        ),
        (
            solution("launch.toml::scale", &[("launch.toml", "grid = [1]\nthreadgroup = [1]\n")]),
            "sources.launch.toml: has no kernel: a launch spec needs a [cuda] or [metal] section",
        ),
        (
            solution("launch.toml::scale", &[("launch.toml", "[cuda]\nheader = \"h\"\n")]),
            "[cuda] has neither source nor source_file",
        ),
        (
            solution("launch.toml::scale", &[("launch.toml", "grid = [1")]),
            "sources.launch.toml: is not a valid TOML launch spec",
        ),
        (
            solution("spec.json::scale", &[("spec.json", "{")]),
            "sources.spec.json: is not a valid JSON launch spec",
        ),
        (
            solution("k.cu::scale", &[("k.cu", "y[0] = x[0];")]),
            "spec.entry_point: 'k.cu': an mlx solution's entry is its launch spec (.toml or .json) or its Python launcher (.py)",
        ),
    ] {
        let got = problems(&sol, &task);
        assert!(got.contains(expected), "expected {expected:?} in {got:?}");
    }
}

#[test]
fn the_builtin_mlx_tasks_have_launch_spec_seeds_and_mlx_baselines() {
    let names: Vec<String> = ksearch_spec::builtin_names()
        .into_iter()
        .filter(|n| n.starts_with("mlx_"))
        .collect();
    assert_eq!(names, ["mlx_attention", "mlx_mamba_scan", "mlx_mamba_step"]);
    for name in names {
        let task = Task::load_builtin(&name).unwrap();
        assert_eq!(task.config.kernel.language, Language::Mlx, "{name}");
        assert!(task.config.targets.iter().any(|t| t == "h200"), "{name}");
        assert!(task.config.targets.iter().any(|t| t.starts_with("apple-m")), "{name}");
        let seed = task.seed.clone().unwrap();
        assert_eq!(seed.path, "seed.toml", "{name}");
        assert!(
            seed.content.contains("[cuda]") && seed.content.contains("[metal]"),
            "{name}"
        );
        let sol = Solution::from_source(&seed.path, &seed.path, seed.content, &task).unwrap();
        assert_eq!(sol.spec.entry_point, format!("seed.toml::{name}"));
        assert!(!task.baselines.is_empty(), "{name}");
        for b in &task.baselines {
            assert_eq!(b.spec.language, Language::Mlx, "{name} {}", b.name);
            b.validate("baseline", &task).unwrap();
        }
    }
}
