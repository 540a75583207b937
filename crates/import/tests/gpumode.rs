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
    // The seed is reference.py's ref_kernel and what it uses, plus one line: the helper modules
    // are files of the task folder on the candidate's module path, so the seed passes ksearch's
    // own static checks.
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

/// A reference whose checker turns TF32 off around its own matmul inside try/finally (as
/// GPU MODE's linalg-cholesky does) and whose ref_kernel uses a context manager of its own that
/// sets cuDNN's switch (as pmpp-conv2d does).
const CHECKED_MATMUL: &str = r#"import torch
from task import input_t

_SCALE = 2.0
_RTOL = 1e-3


class NoTF32:
    def __enter__(self):
        self.old = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False
        return self

    def __exit__(self, *exc):
        torch.backends.cudnn.allow_tf32 = self.old


def ref_kernel(data):
    a, b = data
    with NoTF32():
        return (a @ b) * _SCALE


def _residual(x, y):
    return (x - y).abs().max().item() / _RTOL


def generate_input(size, seed):
    return torch.randn(size, size), torch.randn(size, size)


@torch.no_grad()
def check_implementation(data, output):
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        expected = ref_kernel(data)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return _residual(output, expected) < 1, ''
"#;

#[test]
fn the_seed_leaves_out_what_ref_kernel_does_not_use_and_passes_the_static_checks() {
    let dir = tempfile::tempdir().unwrap();
    let folder = write_task(
        dir.path(),
        "files:\n  - {\"name\": \"task.py\", \"source\": \"task.py\"}\nlang: \"py\"\n\
         tests:\n  - {\"size\": 16, \"seed\": 1}\nbenchmarks:\n  - {\"size\": 64, \"seed\": 2}\n",
        Some(CHECKED_MATMUL),
    );
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap();
    let task = &imported.task;
    let seed = &task.seed.as_ref().unwrap().content;
    for gone in [
        "def check_implementation",
        "try:",
        "def _residual",
        "_RTOL",
        "def generate_input",
        "@torch.no_grad",
    ] {
        assert!(!seed.contains(gone), "{gone} is still in the seed:\n{seed}");
    }
    for kept in [
        "class NoTF32",
        "_SCALE = 2.0",
        "def ref_kernel",
        "import torch",
        "from task import input_t",
    ] {
        assert!(seed.contains(kept), "{kept} is missing from the seed:\n{seed}");
    }
    assert!(
        imported
            .checks
            .iter()
            .any(|c| c.contains("without what ref_kernel does not use")
                && c.contains("check_implementation")
                && c.contains("_residual")),
        "{:?}",
        imported.checks
    );
    assert_eq!(
        ksearch_eval::check_sources(
            ksearch_spec::Language::Python,
            &[SourceFile {
                path: "seed.py".into(),
                content: seed.clone(),
            }],
            &task.config
        ),
        None,
        "the seed passes the static checks:\n{seed}"
    );
    // The definition's reference is reference.py whole (the checker stays the reference's).
    assert!(task.definition.reference.contains("def check_implementation"));
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
            "tests:\n  - {size: [1, [2, null]], seed: 1}\n",
            Some(VECTOR_SUM),
            "tests[0].size[1][1]: null is not a number, string or boolean, nor a list of them",
        ),
        (
            "mapping",
            "tests:\n  - {size: 1, seed: 1}\nbenchmarks:\n  - {size: {rows: 4}, seed: 1}\n",
            Some(VECTOR_SUM),
            "benchmarks[0].size: {\"rows\":4} is not a number, string or boolean",
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
    assert!(text.contains("reference.py: defines no ref_kernel() function."), "{e}");
    assert!(
        text.contains(
            "defines generate_input(**args), called with the arguments of each test and benchmark in \
             task.yml (here: size, seed)"
        ) && text.contains("and ref_kernel(data), called on what generate_input returns")
            && text.contains("This file defines generate_input(size, seed)."),
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
            .contains("defines no ref_kernel() and no generate_input() function. ksearch imports GPU MODE problems")
            && e.to_string().contains("This file defines make_inputs(size), solve(x).")
            && e.to_string()
                .ends_with("add generate_input and ref_kernel to reference.py in a copy of the folder."),
        "{e}"
    );

    // princeton/cross_entropy_py's layout: generate_inputs (plural) with a size the tests do not
    // give, and two reference functions; the message says how to import each (--entry, tested
    // below).
    let folder = write_task(
        &dir.path().join("two_entry_points"),
        "tests:\n  - {vocab_size: 32}\n  - {vocab_size: 64}\n",
        Some(
            "import torch\nimport torch.nn.functional as F\n\n\n\
             def reference_forward(logits, targets):\n    return F.cross_entropy(logits, targets, reduction='none')\n\n\n\
             def reference_backward(logits, targets, grad_output):\n    return torch.softmax(logits, -1) * grad_output[:, None]\n\n\n\
             def generate_inputs(batch_size, vocab_size, seed=42):\n    \
             return torch.randn(batch_size, vocab_size), torch.randint(0, vocab_size, (batch_size,)), torch.randn(batch_size)\n",
        ),
    );
    let e = import_gpumode(&folder, &standin(&dir.path().join("o4"))).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ImportError::Problem { .. }), "{text}");
    for expected in [
        "(here: vocab_size)",
        "This file defines generate_inputs(batch_size, vocab_size, seed=42), reference_backward(logits, targets, \
         grad_output), reference_forward(logits, targets).",
        "It has 2 reference functions (reference_forward, reference_backward) and generate_inputs: import one task \
         per function with --entry, `ksearch import gpumode FOLDER --entry reference_forward --out DIR`, \
         `ksearch import gpumode FOLDER --entry reference_backward --out DIR`",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
}

/// A mask that is float32 ones without masking and int64 0/1 with it, as GPU MODE's
/// bioml-trimul makes it.
const MASKED: &str = r#"import torch


def ref_kernel(data):
    x, mask = data
    return x * mask.reshape(x.shape[0], -1)


def generate_input(size, masked, seed):
    x = torch.randn(size, 8)
    if masked:
        return x, torch.randint(0, 2, (size, 8))
    return x, torch.ones(size, 8)
"#;

#[test]
fn tests_whose_inputs_have_another_dtype_than_most_are_left_out_saying_which() {
    let dir = tempfile::tempdir().unwrap();
    let yml = "tests:\n  - {size: 4, masked: false, seed: 1}\n  - {size: 4, masked: true, seed: 2}\n  \
               - {size: 8, masked: false, seed: 3}\nbenchmarks:\n  - {size: 16, masked: true, seed: 4}\n  \
               - {size: 32, masked: false, seed: 5}\n";
    let folder = write_task(dir.path(), yml, Some(MASKED));
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap();
    let task = &imported.task;
    assert_eq!(task.definition.inputs["mask"].dtype, DType::Float32);
    let uuids: Vec<&str> = task.workloads.iter().map(|w| w.uuid.as_str()).collect();
    assert_eq!(uuids, ["test-0", "test-2", "benchmark-1"]);
    let note = imported
        .checks
        .iter()
        .find(|c| c.contains("were left out"))
        .unwrap_or_else(|| panic!("{:?}", imported.checks));
    assert!(
        note.starts_with("2 of 5 tests and benchmarks were left out, since a definition has one dtype per input and 3")
            && note.contains(
                "test-1, benchmark-0 ('mask' of generate_input's value is a 2-D float32 tensor for test-0 but a 2-D \
                 int64 tensor for test-1)"
            ),
        "{note}"
    );
    let toml = std::fs::read_to_string(out.join("task.toml")).unwrap();
    assert!(toml.contains("# Tests and benchmarks left out: 2 of 5"), "{toml}");
    run_generated(&out);

    // As many of each: no majority, refused naming both groups.
    let yml = "tests:\n  - {size: 4, masked: false, seed: 1}\n  - {size: 4, masked: true, seed: 2}\n";
    let folder = write_task(&dir.path().join("tie"), yml, Some(MASKED));
    let e = import_gpumode(&folder, &standin(&dir.path().join("out2"))).unwrap_err();
    assert!(matches!(e, ImportError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("is a 2-D float32 tensor for test-0 but a 2-D int64 tensor for test-1")
            && e.to_string()
                .contains("(1 each: test-0 / test-1), so there is no majority to keep"),
        "{e}"
    );
    // A rank that changes is still refused.
    let ranked = MASKED.replace("torch.randint(0, 2, (size, 8))", "torch.randint(0, 2, (size,))");
    let yml = "tests:\n  - {size: 4, masked: false, seed: 1}\n  - {size: 8, masked: false, seed: 3}\n  \
               - {size: 4, masked: true, seed: 2}\n";
    let folder = write_task(&dir.path().join("rank"), yml, Some(&ranked));
    let e = import_gpumode(&folder, &standin(&dir.path().join("out3"))).unwrap_err();
    assert!(
        e.to_string().contains(
            "'mask' of generate_input's value is a 2-D float32 tensor for test-0 but a 1-D int64 \
             tensor for test-2"
        ),
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

#[test]
fn list_valued_test_arguments_reach_generate_input_as_tuples_and_name_axes() {
    // Grouped in the manner of GPU MODE's nvfp4_group_gemm: per-group sizes as lists
    // (`m: [8, 16]`), per-group shapes as nested lists; its generate_input asserts that it gets
    // them as tuples, as GPU MODE's eval passes them.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let imported =
        import_gpumode(&fixture("gpumode/grouped_matmul_py"), &standin(&out)).unwrap_or_else(|e| panic!("{e}"));
    let task = &imported.task;
    let def = &task.definition;
    // Axes named after the list elements whose values they take: m[0] changes, m[1] does not.
    assert_eq!(def.inputs["pairs_0_0"].dims(), ["m_0", "k"]);
    assert_eq!(def.inputs["pairs_1_1"].dims(), ["k", "n_1"]);
    assert_eq!(def.inputs["extras_1"].dims(), ["shapes_1_0", "shapes_1_1"]);
    assert_eq!(def.outputs["output1"].dims(), ["m_1", "n_1"]);
    assert!(matches!(def.axes["m_0"], Axis::Var { .. }));
    assert!(matches!(def.axes["m_1"], Axis::Const { value: 16, .. }));
    assert!(matches!(def.axes["k"], Axis::Const { value: 64, .. }));
    let described = format!("{:?}", def.axes["shapes_1_0"]);
    assert!(
        described.contains("element shapes[1][0] of the list argument 'shapes'"),
        "{described}"
    );
    // One workload per distinct test; the benchmark repeats test-0.
    let uuids: Vec<&str> = task.workloads.iter().map(|w| w.uuid.as_str()).collect();
    assert_eq!(uuids, ["test-0", "test-1"]);
    let axis = |name: &str| task.workloads.iter().map(|w| w.axes[name]).collect::<Vec<i64>>();
    assert_eq!(axis("m_0"), [8, 32]);
    assert_eq!(axis("n_1"), [4, 12]);
    assert_eq!(axis("shapes_1_0"), [6, 9]);
    assert_eq!(task.workloads[0].axes.len(), 3, "{:?}", task.workloads[0].axes);
    // The per-group sizes generate_input returns are scalar inputs with each workload's value.
    assert!(def.inputs["sizes_0_0"].is_scalar() && def.inputs["sizes_1_1"].is_scalar());
    let scalar = |w: usize, name: &str| format!("{:?}", task.workloads[w].inputs[name]);
    assert!(scalar(1, "sizes_0_0").contains("32"), "{}", scalar(1, "sizes_0_0"));
    assert!(scalar(1, "sizes_1_1").contains("12"), "{}", scalar(1, "sizes_1_1"));
    assert!(
        def.reference
            .contains("ref_kernel(([(pairs_0_0, pairs_0_1), (pairs_1_0, pairs_1_1)], [extras_0, extras_1]"),
        "{}",
        def.reference
    );
    assert!(imported
        .checks
        .iter()
        .any(|c| c.contains("1 test(s) or benchmark(s) repeated")));
    assert_eq!(task.config.tolerance["float32"], Tolerance { atol: 1e-4, rtol: 1e-4 });
    run_generated(&out);
}

#[test]
fn list_arguments_whose_lengths_change_the_structure_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let yml = "tests:\n  \
      - {\"m\": [8, 16], \"n\": [4, 4], \"k\": 64, \"shapes\": [[3, 5], [6, 7]], \"g\": 2, \"seed\": 1}\n  \
      - {\"m\": [8, 16, 24], \"n\": [4, 4, 4], \"k\": 64, \"shapes\": [[3, 5], [6, 7], [2, 2]], \"g\": 3, \"seed\": 2}\n";
    let grouped = std::fs::read_to_string(fixture("gpumode/grouped_matmul_py/reference.py")).unwrap();
    let folder = write_task(dir.path(), yml, Some(&grouped));
    let e = import_gpumode(&folder, &standin(&dir.path().join("out"))).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ImportError::Unsupported { .. }), "{text}");
    assert!(
        text.starts_with(&folder.join("reference.py").display().to_string())
            && text.contains("another structure or other constants for test-1")
            && text.contains("'m' has 3 elements for test-1 but 2 for test-0")
            && text.contains("'shapes' has 3 elements for test-1 but 2 for test-0")
            && !text.contains("'k'"),
        "{text}"
    );
    // Same group count, but a nested list of another length: named too.
    let yml = "tests:\n  \
      - {\"m\": [8, 16], \"n\": [4, 4], \"k\": 64, \"shapes\": [[3, 5], [6, 7]], \"g\": 2, \"seed\": 1}\n  \
      - {\"m\": [8, 16], \"n\": [4, 4], \"k\": 64, \"shapes\": [[3, 5], [6, 7, 2]], \"g\": 2, \"seed\": 2}\n";
    let folder = write_task(&dir.path().join("nested"), yml, Some(&grouped));
    let e = import_gpumode(&folder, &standin(&dir.path().join("out2"))).unwrap_err();
    assert!(
        e.to_string().contains(
            "'extras_1' of generate_input's value is a 2-D float32 tensor for test-0 but a 3-D float32 tensor for \
             test-1: generate_input's value follows the lengths of the tests' list arguments, which differ (the \
             lists nested in 'shapes' have other lengths for test-1 than for test-0)"
        ),
        "{e}"
    );
}

/// Padding and convolutions, as GPU MODE's helion causal_conv1d (F.pad, then a depthwise
/// F.conv1d) and pmpp conv2d (F.conv2d) use them: the stand-in knows their shapes.
const CONVOLUTIONS: &str = r#"import torch
import torch.nn.functional as F


def ref_kernel(data):
    x, w1, img, w2, vol, w3 = data
    causal = F.conv1d(F.pad(x, (w1.shape[-1] - 1, 0)), w1, groups=x.shape[1])
    strided = F.conv2d(img, w2, stride=2, padding=1, dilation=(1, 2), groups=2)
    same = F.conv3d(vol, w3, padding="same")
    unbatched = F.conv2d(img[0], w2[:, :, 1:, :], padding=(0, 1), groups=2)
    return causal, strided, same, F.pad(img, (1, 2, -1, 0)), unbatched


def generate_input(S, H, seed):
    return (torch.randn(2, 4, S), torch.randn(4, 1, 3), torch.randn(2, 6, H, 13),
            torch.randn(8, 3, 3, 3), torch.randn(1, 2, 4, 5, 6), torch.randn(3, 2, 3, 1, 2))
"#;

/// Each workload's sizes of an output of the imported task.
fn output_sizes(task: &ksearch_spec::Task, output: &str) -> Vec<Vec<i64>> {
    let def = &task.definition;
    task.workloads
        .iter()
        .map(|w| {
            def.outputs[output]
                .dims()
                .iter()
                .map(|a| match &def.axes[a.as_str()] {
                    Axis::Const { value, .. } => *value,
                    Axis::Var { .. } => w.axes[a.as_str()],
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_stand_in_gives_padding_and_convolution_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let folder = write_task(
        dir.path(),
        "tests:\n  - {S: 16, H: 9, seed: 1}\n  - {S: 30, H: 21, seed: 2}\n",
        Some(CONVOLUTIONS),
    );
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap_or_else(|e| panic!("{e}"));
    let task = &imported.task;
    let def = &task.definition;
    let sizes = |output: &str| output_sizes(task, output);
    // Causal padding by W - 1 on the left keeps the length: the output shares x's axis S.
    assert_eq!(def.outputs["output0"].dims()[2], "S");
    assert_eq!(sizes("output0"), [[2, 4, 16], [2, 4, 30]]);
    // floor((H + 2 - 1 * 2 - 1) / 2) + 1 rows, floor((13 + 2 - 2 * 2 - 1) / 2) + 1 = 6 columns.
    assert_eq!(sizes("output1"), [[2, 8, 5, 6], [2, 8, 11, 6]]);
    assert_eq!(sizes("output2"), [[1, 3, 4, 5, 6], [1, 3, 4, 5, 6]]);
    assert_eq!(sizes("output3"), [[2, 6, 8, 16], [2, 6, 20, 16]]);
    // Unbatched (C, H, W) input, a 2x3 kernel padded by one column: (8, H - 1, 13).
    assert_eq!(sizes("output4"), [[8, 8, 13], [8, 20, 13]]);
    run_generated(&out);

    // Channels that do not match the weight's are refused, as PyTorch refuses them.
    let folder = write_task(
        &dir.path().join("mismatch"),
        "tests:\n  - {S: 16, H: 9, seed: 1}\n",
        Some(&CONVOLUTIONS.replace("groups=x.shape[1])", "groups=2)")),
    );
    let e = import_gpumode(&folder, &standin(&dir.path().join("out2"))).unwrap_err();
    assert!(
        e.to_string()
            .contains("raised RuntimeError: Given groups=2, weight of size [4, 1, 3], expected input[2, 4, 18] to have 2 channels, but got 4 channels instead"),
        "{e}"
    );
}

/// The linear-algebra problems' calls (GPU MODE's linalg and bioml folders): logspace scalings,
/// diagonals and diag_embed, einsum over '...', torch.linalg's factorisations and norms, geqrf,
/// torch.distributions samples, multinomial and repeat_interleave.
const LINALG: &str = r#"import torch


def ref_kernel(data):
    a, x = data
    d = torch.diagonal(a, dim1=-2, dim2=-1)
    pair = torch.einsum("...ik,...jk->...ij", x, x)
    values, vectors = torch.linalg.eigh(a)
    q, r = torch.linalg.qr(x)
    h, tau = torch.geqrf(x)
    return (d, pair, torch.einsum("...i,...i", x, x), torch.diag_embed(d),
            torch.linalg.cholesky_ex(a, check_errors=False).L, values, r, tau,
            torch.linalg.householder_product(h, tau), torch.linalg.matrix_norm(a, ord=1, dim=(-2, -1)))


def generate_input(batch, n, seed):
    gen = torch.Generator()
    gen.manual_seed(seed)
    a = torch.randn((batch, n, n), generator=gen)
    a = a * torch.logspace(0.0, -2.0, n)
    a.diagonal(dim1=-2, dim2=-1).add_(torch.linspace(1.0, 0.25, n))
    heavy = torch.distributions.Cauchy(0, 2).sample((batch, 3, n, 5))
    picks = torch.multinomial(torch.rand(4), batch, replacement=True, generator=gen)
    scale = torch.rand(n // 2).repeat_interleave(2)
    return a, heavy * scale[None, None, :, None] + picks.float()[:, None, None, None]
"#;

#[test]
fn the_stand_in_gives_linear_algebra_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let folder = write_task(
        dir.path(),
        "tests:\n  - {batch: 2, n: 8, seed: 1}\n  - {batch: 4, n: 16, seed: 2}\n",
        Some(LINALG),
    );
    let out = dir.path().join("out");
    let imported = import_gpumode(&folder, &standin(&out)).unwrap_or_else(|e| panic!("{e}"));
    let task = &imported.task;
    let sizes = |output: &str| output_sizes(task, output);
    assert_eq!(sizes("output0"), [[2, 8], [4, 16]]);
    assert_eq!(sizes("output1"), [[2, 3, 8, 8], [4, 3, 16, 16]]);
    assert_eq!(sizes("output2"), [[2, 3, 8], [4, 3, 16]]);
    assert_eq!(sizes("output3"), [[2, 8, 8], [4, 16, 16]]);
    assert_eq!(sizes("output4"), [[2, 8, 8], [4, 16, 16]]);
    assert_eq!(sizes("output5"), [[2, 8], [4, 16]]);
    assert_eq!(sizes("output6"), [[2, 3, 5, 5], [4, 3, 5, 5]]);
    assert_eq!(sizes("output7"), [[2, 3, 5], [4, 3, 5]]);
    assert_eq!(sizes("output8"), [[2, 3, 8, 5], [4, 3, 16, 5]]);
    assert_eq!(sizes("output9"), [[2], [4]]);
    run_generated(&out);
}
