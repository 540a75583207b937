//! `ksearch import gpumode --entry FUNCTION`: a GPU MODE problem laid out as princeton's
//! cross_entropy_py (two reference functions, no ref_kernel; generate_inputs with a batch size
//! its eval.py fixes, which no test gives) imports as one task per function. The folder here is
//! a small one written for this test, with the stand-in for PyTorch.

mod common;
use common::*;

use ksearch_import::{import_gpumode, ImportError, Options};
use ksearch_spec::DType;
use std::path::{Path, PathBuf};

const REFERENCE: &str = "import torch\n\nATOL = 1e-3\nRTOL = 1e-2\n\n\n\
def reference_forward(logits, targets):\n    return logits.float().sum(-1) + targets.float()\n\n\n\
def reference_backward(logits, targets, grad_output):\n    \
return (logits.float() * grad_output.unsqueeze(1)).to(logits.dtype)\n\n\n\
def generate_inputs(batch_size, vocab_size, seed=42):\n    \
logits = torch.randn(batch_size, vocab_size, dtype=torch.bfloat16)\n    \
targets = torch.randint(0, vocab_size, (batch_size,))\n    \
grad_output = torch.randn(batch_size, dtype=torch.float32)\n    \
return logits, targets, grad_output\n";

const YML: &str = "files:\n  - {\"name\": \"submission.py\", \"source\": \"@SUBMISSION@\"}\n  \
- {\"name\": \"reference.py\", \"source\": \"reference.py\"}\n  - {\"name\": \"eval.py\", \"source\": \"eval.py\"}\n\
lang: \"py\"\nconfig:\n  main: \"eval.py\"\ntests:\n  - {\"vocab_size\": 32}\n  - {\"vocab_size\": 64}\n\
benchmarks:\n  - {\"vocab_size\": 64}\n";

fn folder(dir: &Path, eval_py: &str) -> PathBuf {
    let folder = dir.join("cross_entropy_py");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("task.yml"), YML).unwrap();
    std::fs::write(folder.join("reference.py"), REFERENCE).unwrap();
    std::fs::write(folder.join("eval.py"), eval_py).unwrap();
    folder
}

const EVAL_PY: &str = "from reference import generate_inputs, ATOL, RTOL\n\nB = 1_6\n\n\n\
def run(vocab_size, seed):\n    return generate_inputs(B, vocab_size, seed)\n";

fn entry(out: &Path, function: &str) -> Options {
    let mut o = standin(out);
    o.entry = Some(function.into());
    o
}

#[test]
fn each_reference_function_imports_as_a_task_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let folder = folder(dir.path(), EVAL_PY);

    let forward = import_gpumode(&folder, &entry(&dir.path().join("fwd"), "reference_forward")).unwrap();
    let def = &forward.task.definition;
    assert_eq!(def.name, "cross_entropy_py-forward");
    // Only the values the function names are its inputs: grad_output is backward's alone.
    assert_eq!(def.inputs.keys().collect::<Vec<_>>(), ["logits", "targets"]);
    assert_eq!(def.inputs["logits"].dtype, DType::Bfloat16);
    assert_eq!(def.outputs.values().next().unwrap().dtype, DType::Float32);
    // The batch size eval.py fixes (B = 1_6) and the vocabulary sizes of the tests.
    let vocab: Vec<i64> = forward.task.workloads.iter().map(|w| w.axes["vocab_size"]).collect();
    assert_eq!(vocab, [32, 64], "the benchmark repeats a test's size");
    let logits_dims = def.inputs["logits"].dims();
    assert!(
        matches!(def.axes[&logits_dims[0]], ksearch_spec::Axis::Const { value: 16, .. }),
        "{:?}",
        def.axes
    );
    assert!(def
        .reference
        .contains("_ksearch_reference.reference_forward(*(logits, targets,))"));
    // The folder has no helper modules (task.py, utils.py): no module path names a folder that
    // was not written.
    assert!(
        forward.task.config.kernel.python_path.is_empty(),
        "{:?}",
        forward.task.config.kernel.python_path
    );
    let checks = forward.checks.join("\n");
    for expected in [
        "--entry reference_forward: one of reference.py's reference functions as the task's kernel; the inputs are \
         reference_forward's arguments (logits, targets) by name from generate_inputs's return (logits, targets, \
         grad_output)",
        "generate_inputs also takes batch_size, which no test or benchmark gives: batch_size = 16, as eval.py \
         calls it",
        "reference.py has no check_implementation: ksearch compares every element, |out - ref| <= atol + rtol * \
         |ref|, with reference.py's ATOL = 0.001 and RTOL = 0.01",
    ] {
        assert!(checks.contains(expected), "{expected}\n{checks}");
    }
    let seed = std::fs::read_to_string(dir.path().join("fwd/seed.py")).unwrap();
    assert!(
        seed.contains("def custom_kernel(data):\n    return reference_forward(*data)\n"),
        "{seed}"
    );
    assert!(
        !seed.contains("def generate_inputs"),
        "the seed keeps what the function reaches:\n{seed}"
    );
    run_generated(&dir.path().join("fwd"));

    let backward = import_gpumode(&folder, &entry(&dir.path().join("bwd"), "reference_backward")).unwrap();
    let def = &backward.task.definition;
    assert_eq!(def.name, "cross_entropy_py-backward");
    assert_eq!(
        def.inputs.keys().collect::<Vec<_>>(),
        ["logits", "targets", "grad_output"]
    );
    assert_eq!(def.outputs.values().next().unwrap().dtype, DType::Bfloat16);
    run_generated(&dir.path().join("bwd"));
}

#[test]
fn an_entry_or_an_argument_that_cannot_be_found_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let folder = folder(dir.path(), EVAL_PY);
    let e = import_gpumode(&folder, &entry(&dir.path().join("o1"), "reference_sideways")).unwrap_err();
    assert!(matches!(e, ImportError::Problem { .. }), "{e}");
    assert!(
        e.to_string().contains(
            "--entry reference_sideways: reference.py defines no function reference_sideways (its functions: \
             generate_inputs, reference_backward, reference_forward)"
        ),
        "{e}"
    );

    // eval.py calls generate_inputs with a batch size that is not a constant.
    let dir = tempfile::tempdir().unwrap();
    let folder = self::folder(
        dir.path(),
        "from reference import generate_inputs\n\n\ndef run(b, v):\n    return generate_inputs(b, v)\n",
    );
    let e = import_gpumode(&folder, &entry(&dir.path().join("o2"), "reference_forward")).unwrap_err();
    assert!(
        e.to_string().contains(
            "generate_inputs needs batch_size, which no test or benchmark of task.yml gives, and eval.py's call of \
             generate_inputs does not fix batch_size to a constant"
        ),
        "{e}"
    );

    // eval.py does not call it at all.
    let dir = tempfile::tempdir().unwrap();
    let folder = self::folder(dir.path(), "B = 16\n");
    let e = import_gpumode(&folder, &entry(&dir.path().join("o3"), "reference_forward")).unwrap_err();
    assert!(
        e.to_string()
            .contains("and eval.py (task.yml's config.main) does not call generate_inputs"),
        "{e}"
    );
}
