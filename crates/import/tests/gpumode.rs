//! `ksearch import gpumode` on a sample task folder (written for these tests), with the stand-in.

mod common;
use common::*;

use ksearch_import::{import_gpumode, ImportError};
use ksearch_spec::{Axis, Calling, DType, Distribution, SourceFile, Tolerance};
use std::path::Path;

#[test]
fn grayscale_becomes_a_task_with_a_workload_per_distinct_test() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gray");
    let imported = import_gpumode(&fixture("gpumode/grayscale_py"), &standin(&out)).unwrap();
    let task = &imported.task;
    let def = &task.definition;
    assert_eq!(def.name, "grayscale_py");
    assert!(
        matches!(def.axes["size"], Axis::Var { .. }),
        "named after the tests' argument"
    );
    assert!(matches!(def.axes["image_dim2"], Axis::Const { value: 3, .. }));
    assert_eq!(
        def.inputs.keys().collect::<Vec<_>>(),
        ["image", "output"],
        "ref_kernel's unpacking"
    );
    assert_eq!(def.inputs["image"].dims(), ["size", "size", "image_dim2"]);
    assert_eq!(def.outputs["result"].dims(), ["size", "size"]);
    assert!(def.description.as_deref().unwrap().contains("Y = 0.2989 R"));
    // Three tests and two benchmarks; the 64 benchmark repeats the 64 test.
    let uuids: Vec<&str> = task.workloads.iter().map(|w| w.uuid.as_str()).collect();
    assert_eq!(uuids, ["test-0", "test-1", "test-2", "benchmark-1"]);
    let sizes: Vec<i64> = task.workloads.iter().map(|w| w.axes["size"]).collect();
    assert_eq!(sizes, [16, 33, 64, 256]);

    let k = &task.config.kernel;
    assert_eq!(
        (k.entry.as_deref(), k.calling, k.language.as_str()),
        (Some("custom_kernel"), Calling::Tuple, "python")
    );
    assert!(k.init.is_none());
    // check_implementation's literal tolerances, torch.rand's range.
    assert_eq!(task.config.tolerance["float32"], Tolerance { atol: 1e-4, rtol: 1e-4 });
    assert_eq!(
        task.config.inputs["image"],
        Distribution::Uniform { low: 0.0, high: 1.0 }
    );
    assert!(!task.config.inputs.contains_key("output"));
    // The output buffer generate_input passes among the inputs may be filled by a submission.
    assert_eq!(task.config.kernel.writable_inputs, vec!["output".to_string()]);
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("'output' is made with torch.empty") && c.contains("writable_inputs")));
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("check_implementation is replaced")));
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("1 test(s) or benchmark(s) repeated")));
    // The reference and seed carry the folder's task.py and ../utils.py with them.
    let seed = task.seed.as_ref().unwrap();
    // The seed is reference.py plus one line: the helper modules are files of the task folder
    // on the candidate's module path, so the seed passes ksearch's own static checks.
    assert!(!seed.content.contains("_ksearch_module") && !seed.content.contains("__dict__"));
    assert_eq!(task.config.kernel.python_path, vec!["modules".to_string()]);
    assert!(out.join("modules/task.py").is_file() && out.join("modules/utils.py").is_file());
    assert_eq!(
        ksearch_eval::check_sources(
            ksearch_spec::Language::Python,
            &[SourceFile {
                path: "seed.py".into(),
                content: seed.content.clone(),
            }],
            &task.config
        ),
        None,
        "the seed passes the static checks"
    );
    assert!(seed.content.trim_end().ends_with("custom_kernel = ref_kernel"));
    assert!(def.reference.contains("def run(image, output):"));
    run_generated(&out);
}

fn write_task(dir: &Path, yml: &str, reference: Option<&str>) -> std::path::PathBuf {
    let folder = dir.join("task");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("task.yml"), yml).unwrap();
    if let Some(r) = reference {
        std::fs::write(folder.join("reference.py"), r).unwrap();
    }
    folder
}

const VECTOR_SUM: &str = "import torch\nfrom task import input_t\nfrom utils import make_match_reference\n\n\
def ref_kernel(data):\n    return data.sum(dim=0, keepdim=True)\n\n\
def generate_input(size, seed):\n    return torch.randn(size, dtype=torch.float16)\n\n\
check_implementation = make_match_reference(ref_kernel)\n";

#[test]
fn a_bare_tensor_input_uses_calling_returns_and_absent_helpers_get_stubs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = write_task(
        dir.path(),
        "files:\n  - {\"name\": \"task.py\", \"source\": \"task.py\"}\n  - {\"name\": \"utils.py\", \"source\": \"../utils.py\"}\n\
         lang: \"py\"\ntests:\n  - {\"size\": 100, \"seed\": 1}\nbenchmarks:\n  - {\"size\": 4096, \"seed\": 2}\n",
        Some(VECTOR_SUM),
    );
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap();
    let task = &imported.task;
    assert_eq!(task.config.kernel.calling, Calling::Returns);
    assert_eq!(task.definition.inputs["x"].dtype, DType::Float16);
    assert_eq!(task.definition.inputs["x"].dims(), ["size"]);
    assert!(matches!(
        task.definition.axes["output_dim0"],
        Axis::Const { value: 1, .. }
    ));
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("task.py is not in the folder")));
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("utils.py is not in the folder")));
    // No literal tolerances and no utils.py to read defaults from: ksearch's defaults.
    assert!(task.config.tolerance.is_empty());
    run_generated(&out);
}

#[test]
fn malformed_folders_give_errors_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        (
            "bad_yaml",
            "tests: [ {size: 1\n",
            Some(VECTOR_SUM),
            "not a valid task.yml",
        ),
        (
            "cuda",
            "lang: \"cu\"\ntests:\n  - {size: 1, seed: 1}\n",
            Some(VECTOR_SUM),
            "lang: 'cu': only Python tasks",
        ),
        (
            "no_tests",
            "lang: \"py\"\n",
            Some(VECTOR_SUM),
            "tests: lists no tests and no benchmarks",
        ),
        (
            "nested",
            "tests:\n  - {size: [1, 2], seed: 1}\n",
            Some(VECTOR_SUM),
            "tests[0].size: [1,2] is not a number",
        ),
        (
            "no_reference",
            "tests:\n  - {size: 1, seed: 1}\n",
            None,
            "files: the reference",
        ),
        (
            "missing_helper",
            "files:\n  - {\"name\": \"rope.py\", \"source\": \"rope.py\"}\ntests:\n  - {size: 1, seed: 1}\n",
            Some(VECTOR_SUM),
            "files[0].source: 'rope.py'",
        ),
    ];
    for (name, yml, reference, expected) in cases {
        let case_dir = dir.path().join(name);
        let folder = write_task(&case_dir, yml, *reference);
        let e = import_gpumode(&folder, &standin(&case_dir.join("out"))).unwrap_err();
        let text = e.to_string();
        let yml_path = folder.join("task.yml").display().to_string();
        assert!(matches!(e, ImportError::TaskYml { .. }), "{name}: {text}");
        assert!(text.starts_with(&yml_path) && text.contains(expected), "{name}: {text}");
    }
    let e = import_gpumode(&dir.path().join("nowhere"), &standin(&dir.path().join("o"))).unwrap_err();
    assert!(e.to_string().contains("nowhere"), "{e}");

    let folder = write_task(
        &dir.path().join("no_ref_kernel"),
        "tests:\n  - {size: 1, seed: 1}\n",
        Some("import torch\n\ndef generate_input(size, seed):\n    return torch.randn(size)\n"),
    );
    let e = import_gpumode(&folder, &standin(&dir.path().join("o2"))).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("reference.py: defines no ref_kernel() function"), "{e}");
    assert!(
        text.contains("ref_kernel(data) and generate_input(**args)") && text.contains("(it defines generate_input)"),
        "names what ksearch expects and what the file has: {e}"
    );

    // Laid out otherwise altogether: both entry points missing, the file's own functions named.
    let folder = write_task(
        &dir.path().join("other_layout"),
        "tests:
  - {size: 1, seed: 1}
",
        Some(
            "import torch

def make_inputs(size):
    return torch.randn(size)


def solve(x):
    return x
",
        ),
    );
    let e = import_gpumode(&folder, &standin(&dir.path().join("o3"))).unwrap_err();
    assert!(
        e.to_string()
            .contains("defines no ref_kernel() and no generate_input() function: ksearch imports GPU MODE problems")
            && e.to_string().contains("(it defines make_inputs, solve)"),
        "{e}"
    );
}

/// generate_input returning a dict of weights and settings beside nested lists of tensors.
const NESTED: &str = r#"import torch


def ref_kernel(data):
    x, config, pair = data
    assert config["mode"] == "fast" and config["bias"] is None
    return x * config["scale"] + pair[0] + pair[1][0] + config["w"]


def generate_input(size, seed):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn(size, 4, device="cuda", generator=gen)
    config = {"w": torch.rand(size, 4, device="cuda"), "scale": 0.5, "mode": "fast", "bias": None, "n": size}
    return x, config, [torch.randn(size, 4, device="cuda"), (torch.zeros(size, 4, device="cuda"),)]
"#;

#[test]
fn dicts_and_nested_lists_from_generate_input_become_flat_named_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = write_task(
        dir.path(),
        "tests:\n  - {size: 8, seed: 1}\n  - {size: 3, seed: 2}\n",
        Some(NESTED),
    );
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap_or_else(|e| panic!("{e}"));
    let task = &imported.task;
    let def = &task.definition;
    assert_eq!(
        def.inputs.keys().collect::<Vec<_>>(),
        ["x", "config_w", "config_scale", "config_n", "pair_0", "pair_1_0"],
        "leaves named by their path; the string and None stay constants"
    );
    assert!(def.inputs["config_scale"].is_scalar() && def.inputs["config_n"].is_scalar());
    assert_eq!(task.config.kernel.calling, Calling::Tuple);
    // The size is a scalar input whose value each workload carries.
    assert!(format!("{:?}", task.workloads[1].inputs["config_n"]).contains('3'));
    assert!(
        def.reference.contains(
            "ref_kernel((x, {'w': config_w, 'scale': config_scale, 'mode': 'fast', 'bias': None, 'n': config_n}, [pair_0, (pair_1_0,)]))"
        ),
        "{}",
        def.reference
    );
    let seed = &task.seed.as_ref().unwrap().content;
    assert!(seed.contains("def custom_kernel(data):"), "{seed}");
    assert!(imported.checks.iter().any(|c| c.contains("gets them flattened")));
    run_generated(&out);
}
