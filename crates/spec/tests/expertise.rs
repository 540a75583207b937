//! `[[expertise]]` in task.toml: CUDA kernels (files of the task, or the best kernel of an
//! earlier run) loaded as expertise to adapt, with every mistake named by file and field.

use ksearch_spec::Task;
use std::path::Path;

const DEFINITION: &str = r#"{
  "name": "vadd", "op_type": "add", "axes": {"N": {"type": "var"}},
  "inputs": {"a": {"shape": ["N"], "dtype": "float32"}, "b": {"shape": ["N"], "dtype": "float32"}},
  "outputs": {"c": {"shape": ["N"], "dtype": "float32"}},
  "reference": "def run(a, b):\n    return a + b\n"
}"#;

const KERNEL: &str = "__global__ void vadd(const float *a, const float *b, float *c, int n) {}\n";

fn write(root: &Path, name: &str, text: &str) {
    let p = root.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn task_folder(toml: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "definition.json", DEFINITION);
    write(
        dir.path(),
        "workloads.jsonl",
        "{\"uuid\": \"w0\", \"axes\": {\"N\": 8}, \"inputs\": {}}\n",
    );
    write(dir.path(), "task.toml", toml);
    for (name, text) in files {
        write(dir.path(), name, text);
    }
    dir
}

/// The error of loading `toml` (with `files`), as text, and task.toml's path for comparisons.
fn error(toml: &str, files: &[(&str, &str)]) -> (String, String) {
    let dir = task_folder(toml, files);
    let toml_path = dir.path().join("task.toml").display().to_string();
    let err = Task::load_folder(dir.path())
        .expect_err("should be rejected")
        .to_string();
    (err, toml_path)
}

#[test]
fn a_file_of_the_task_is_loaded_with_its_language() {
    let dir = task_folder(
        r#"
[kernel]
language = "mlx"

[[expertise]]
file = "expertise/vadd.cu"
description = "  the CUDA kernel this task ports: one thread per element  "
"#,
        &[("expertise/vadd.cu", KERNEL)],
    );
    let task = Task::load_folder(dir.path()).unwrap();
    assert_eq!(task.expertise.len(), 1);
    let e = &task.expertise[0];
    assert_eq!(e.language, ksearch_spec::Language::Cuda);
    assert_eq!(e.origin, "expertise/vadd.cu");
    assert_eq!(e.description, "the CUDA kernel this task ports: one thread per element");
    assert_eq!(e.sources.len(), 1);
    assert_eq!(e.sources[0].path, "vadd.cu");
    assert_eq!(e.sources[0].content, KERNEL);
    // A task without the section has no expertise, and the built-in tasks load as before.
    let plain = task_folder("[kernel]\nlanguage = \"c\"\n", &[]);
    assert!(Task::load_folder(plain.path()).unwrap().expertise.is_empty());
    // The MLX tasks name the CUDA kernels they are to adapt; the other built-in tasks none.
    for name in ksearch_spec::builtin_names() {
        let task = Task::load_builtin(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
        if name.starts_with("mlx_") {
            assert!(
                task.expertise
                    .iter()
                    .any(|e| e.language == ksearch_spec::Language::Cuda),
                "{name}"
            );
        } else {
            assert!(task.expertise.is_empty(), "{name}");
        }
    }
}

#[test]
fn a_file_of_another_built_in_task_is_shared_not_copied() {
    let dir = task_folder(
        "[[expertise]]\ntask = \"mamba_scan\"\nfile = \"seed.cu\"\ndescription = \"the CUDA seed\"\n",
        &[],
    );
    let task = Task::load_folder(dir.path()).unwrap();
    let e = &task.expertise[0];
    assert_eq!(
        (e.origin.as_str(), e.language.as_str()),
        ("tasks/mamba_scan/seed.cu", "cuda")
    );
    let seed = Task::load_builtin("mamba_scan").unwrap().seed.unwrap();
    assert_eq!(e.sources[0].content, seed.content);
}

#[test]
fn the_best_kernel_of_a_run_is_loaded() {
    let runs = tempfile::tempdir().unwrap();
    let run = runs.path().join("vadd-20261201-101500");
    write(&run, "best/kernel.cu", KERNEL);
    write(&run, "best/detail/helpers.cuh", "// helpers\n");
    write(&run, "run.sqlite", "not read");
    let toml = format!(
        "[kernel]\nlanguage = \"mlx\"\n\n[[expertise]]\nfrom_run = \"{}\"\ndescription = \"the best CUDA kernel of the CUDA task\"\n",
        run.display()
    );
    let dir = task_folder(&toml, &[]);
    let task = Task::load_folder(dir.path()).unwrap();
    let e = &task.expertise[0];
    assert_eq!(e.language, ksearch_spec::Language::Cuda);
    assert!(e.origin.starts_with("best kernel of run ") && e.origin.ends_with("vadd-20261201-101500"));
    let paths: Vec<&str> = e.sources.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["detail/helpers.cuh", "kernel.cu"]);

    // A relative run directory starts from the task folder.
    let dir = task_folder(
        "[[expertise]]\nfrom_run = \"runs/r1\"\ndescription = \"earlier run\"\nlanguage = \"cuda\"\n",
        &[("runs/r1/best/k.cu", KERNEL)],
    );
    let task = Task::load_folder(dir.path()).unwrap();
    assert_eq!(task.expertise[0].sources[0].path, "k.cu");
}

#[test]
fn mistakes_are_named_by_file_and_field() {
    // (task.toml, files of the task, the problem expected)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            "[[expertise]]\nfile = \"expertise/missing.cu\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].file: 'expertise/missing.cu' does not exist in the task folder",
        ),
        (
            "[[expertise]]\ntask = \"mamba_scan\"\nfile = \"nope.cu\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].file: 'nope.cu' does not exist in the built-in task 'mamba_scan'",
        ),
        (
            "[[expertise]]\ntask = \"no_such_task\"\nfile = \"seed.cu\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].file: 'seed.cu' does not exist in a built-in task: there is no built-in task 'no_such_task'",
        ),
        (
            "[[expertise]]\ntask = \"mamba_scan\"\nfrom_run = \"runs/r\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].task: names the built-in task that holds `file`; give `file` too",
        ),
        (
            "[[expertise]]\nfile = \"../outside.cu\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].file: '../outside.cu' must not contain empty, '.' or '..' parts",
        ),
        (
            "[[expertise]]\nfile = \"k.cu\"\nfrom_run = \"runs/r\"\ndescription = \"x\"\n",
            &[("k.cu", KERNEL)],
            "expertise[0]: give either `file` or `from_run`, not both",
        ),
        (
            "[[expertise]]\ndescription = \"x\"\n",
            &[],
            "expertise[0]: needs `file` (a source in the task folder) or `from_run`",
        ),
        (
            "[[expertise]]\nfile = \"k.cu\"\n",
            &[("k.cu", KERNEL)],
            "expertise[0]: missing field `description`",
        ),
        (
            "[[expertise]]\nfile = \"k.cu\"\ndescription = \" \"\n",
            &[("k.cu", KERNEL)],
            "expertise[0].description: must say what the implementation is",
        ),
        (
            "[[expertise]]\nfile = \"k.cu\"\ndescription = \"x\"\nurl = \"https://example.com\"\n",
            &[("k.cu", KERNEL)],
            "expertise[0].url: unknown field `url`",
        ),
        (
            "[[expertise]]\nfile = \"k.cu\"\ndescription = \"x\"\nlanguage = \"fortran\"\n",
            &[("k.cu", KERNEL)],
            "expertise[0].language: unknown language 'fortran'",
        ),
        (
            "[[expertise]]\nfile = \"notes.txt\"\ndescription = \"x\"\n",
            &[("notes.txt", "text")],
            "expertise[0].language: is not set and 'notes.txt' has no extension that names one",
        ),
        (
            "[[expertise]]\nfrom_run = \"runs/unfinished\"\ndescription = \"x\"\n",
            &[("runs/unfinished/run.sqlite", "")],
            "expertise[0].from_run: 'runs/unfinished' has no best/ folder",
        ),
        (
            "[[expertise]]\nfrom_run = \"runs/nothing-here\"\ndescription = \"x\"\n",
            &[],
            "expertise[0].from_run: 'runs/nothing-here' is not a directory",
        ),
    ];
    for (toml, files, expected) in cases {
        let (err, toml_path) = error(toml, files);
        assert!(
            err.starts_with(&format!("{toml_path}: {expected}")),
            "expected {expected:?}, got:\n{err}"
        );
    }
    // An oversized kernel is refused rather than cut.
    let big = "x".repeat(ksearch_spec::MAX_EXPERTISE_CHARS + 1);
    let (err, _) = error(
        "[[expertise]]\nfile = \"big.cu\"\ndescription = \"x\"\n",
        &[("big.cu", &big)],
    );
    assert!(
        err.contains("task.toml: expertise[0].file: big.cu has 60001 characters; at most 60000 go into prompts"),
        "{err}"
    );
}

#[test]
fn the_mlx_tasks_cite_the_kernels_ksearch_found_on_the_h200_as_the_runs_wrote_them() {
    // The CUDA results are the MLX tasks' first knowledge (issue 7): the best kernel of each
    // recorded tuner run, kept beside its task, byte for byte what the run wrote.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (mlx, origin, run) in [
        (
            "mlx_mamba_scan",
            "tasks/mamba_scan/solutions/h200_tuner_best.cu",
            "results/2026-11-30-h200-mamba_scan-tuner/best/kernel.cu",
        ),
        (
            "mlx_attention",
            "tasks/attention_prefill/solutions/h200_tuner_best.py",
            "results/2026-11-30-h200-attention_prefill-tuner/best/attention.py",
        ),
    ] {
        let task = Task::load_builtin(mlx).unwrap();
        let e = task
            .expertise
            .iter()
            .find(|e| e.origin == origin)
            .unwrap_or_else(|| panic!("{mlx} does not cite {origin}"));
        let written = std::fs::read_to_string(root.join(run)).unwrap();
        assert_eq!(e.sources[0].content, written, "{origin} differs from {run}");
        assert!(
            e.description.contains(run.split("/best").next().unwrap()),
            "{}",
            e.description
        );
    }
}
