//! Kernel languages as task.toml and Solution JSON spell them: every known one reads, and an
//! unknown one is refused naming the field, the value and the known languages.

use ksearch_spec::{Language, Solution, Task};

const DEFINITION: &str = r#"{
  "name": "vadd", "op_type": "add", "axes": {"N": {"type": "var"}},
  "inputs": {"a": {"shape": ["N"], "dtype": "float32"}, "b": {"shape": ["N"], "dtype": "float32"}},
  "outputs": {"c": {"shape": ["N"], "dtype": "float32"}},
  "reference": "def run(a, b):\n    return a + b\n"
}"#;

const KNOWN: &str = "expected one of c, cuda, triton, python, mlx";

fn folder(toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("definition.json"), DEFINITION).unwrap();
    std::fs::write(
        dir.path().join("workloads.jsonl"),
        "{\"uuid\": \"w0\", \"axes\": {\"N\": 8}, \"inputs\": {}}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("task.toml"), toml).unwrap();
    dir
}

#[test]
fn every_language_reads_from_task_toml() {
    for l in Language::ALL {
        let dir = folder(&format!("[kernel]\nlanguage = \"{l}\"\nentry = \"vadd\"\n"));
        let task = Task::load_folder(dir.path()).unwrap();
        assert_eq!(task.config.kernel.language, l);
    }
    let dir = folder("");
    assert_eq!(
        Task::load_folder(dir.path()).unwrap().config.kernel.language,
        Language::C
    );
}

#[test]
fn an_unknown_kernel_language_names_the_field_the_value_and_the_known_ones() {
    let dir = folder("[kernel]\nlanguage = \"fortran\"\n");
    let err = Task::load_folder(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("task.toml: kernel.language: unknown language 'fortran'") && err.contains(KNOWN),
        "{err}"
    );
    let dir = folder("[[baselines]]\nname = \"b\"\nfile = \"b.py\"\nentry = \"run\"\nlanguage = \"CUDA\"\n");
    let err = Task::load_folder(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("baselines[0].language: unknown language 'CUDA'") && err.contains(KNOWN),
        "{err}"
    );
}

#[test]
fn an_unknown_solution_language_names_the_field_the_value_and_the_known_ones() {
    let dir = folder("[kernel]\nlanguage = \"c\"\nentry = \"vadd\"\n");
    let task = Task::load_folder(dir.path()).unwrap();
    let json = r#"{"name": "s", "definition": "vadd",
        "spec": {"language": "zig", "entry_point": "k.zig::vadd"},
        "sources": [{"path": "k.zig", "content": "x"}]}"#;
    let path = dir.path().join("s.json");
    std::fs::write(&path, json).unwrap();
    let err = Solution::load(&path, &task).unwrap_err().to_string();
    assert!(
        err.contains("spec.language: unknown language 'zig'") && err.contains(KNOWN),
        "{err}"
    );
    // FlashInfer-Bench's cpp is read, with its default binding, tvm-ffi; tilelang is refused.
    std::fs::write(&path, json.replace("zig", "cpp")).unwrap();
    let sol = Solution::load(&path, &task).unwrap();
    assert_eq!(sol.spec.language, ksearch_spec::Language::Cpp);
    assert_eq!(sol.spec.binding, Some(ksearch_spec::Binding::TvmFfi));
    std::fs::write(&path, json.replace("zig", "tilelang")).unwrap();
    let err = Solution::load(&path, &task).unwrap_err().to_string();
    assert!(err.contains("'tilelang' is not built by ksearch yet"), "{err}");
}
