//! `ksearch import kernelbench` with real PyTorch, which is when the probe runs the model for real:
//! problems that cannot be checked are refused naming their defect, dropout is turned off in the
//! reference and in candidates alike, and a computed input keeps the range the model needs. The
//! problems are small KernelBench-like files written for these tests, shaped after KernelBench's
//! level1/98_KLDivLoss, level2/9_Matmul_Subtract_Multiply_ReLU, level2/66_Matmul_Dropout_Softmax
//! and level2/80_Gemm_Max_Subtract_GELU; the seeds are evaluated on the CPU.
//!
//! They need `$KSEARCH_PYTHON` naming an interpreter with PyTorch and NumPy (the probe and the
//! harness both use it). Without one they are skipped, saying so; `KSEARCH_REQUIRE_TORCH=1` makes
//! that a failure.

mod common;
use common::torch_python;

use ksearch_import::{import_kernelbench, ImportError, Imported, Options};
use ksearch_spec::{Distribution, Task};
use std::path::Path;

fn import(python: &Path, dir: &Path, name: &str, source: &str) -> Result<Imported, ImportError> {
    let file = dir.join(format!("{name}.py"));
    std::fs::write(&file, source).unwrap();
    let mut opts = Options::new(dir.join(name));
    opts.python = Some(python.to_path_buf());
    import_kernelbench(&file, &opts)
}

/// Evaluates the task's seed on the CPU: the record, or why the evaluation could not be made
/// (a reference the harness refuses is an error, not a record).
fn eval_seed(task: &Task) -> Result<ksearch_eval::Evaluation, ksearch_eval::EvalError> {
    let seed = task.seed.clone().unwrap();
    let solution = ksearch_spec::Solution::from_source(&seed.path, &seed.path, seed.content, task).unwrap();
    let mut opts = ksearch_eval::EvalOptions::new(7);
    opts.device = Some("cpu".into());
    ksearch_eval::evaluate(task, &solution, &opts, &|m| eprintln!("{m}"))
}

const ZERO_AFTER_MAX: &str = "import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.gemm(x)
        x = torch.max(x, dim=1, keepdim=True).values
        # The mean over a dimension of size 1 is the value itself: zero everywhere.
        return torch.nn.functional.gelu(x - x.mean(dim=1, keepdim=True))

batch_size = 16
in_features = 32
out_features = 24

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
";

/// Linear(512 -> 64) of inputs in [0, 1) stays below 1, so subtracting 2 and a ReLU give zeros;
/// but inputs drawn under the seed the weights were drawn under are the same uniform numbers as
/// the weights' first rows, and those diagonal elements reach 3.8 after the ReLU. KernelBench's
/// check draws its inputs under trial seeds of their own, where the output is all zeros.
const ZERO_UNLESS_SEEDS_COINCIDE: &str = "import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, subtract_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value

    def forward(self, x):
        return torch.relu((self.linear(x) - self.subtract_value) * 1.5)

batch_size = 16
in_features = 512
out_features = 64

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, 2.0]
";

#[test]
fn a_problem_whose_output_is_zero_on_its_own_inputs_is_refused_naming_its_defect() {
    let Some(python) = torch_python("zero_outputs", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, source) in [
        ("80_gemm_max_subtract", ZERO_AFTER_MAX),
        ("9_matmul_subtract_relu", ZERO_UNLESS_SEEDS_COINCIDE),
    ] {
        let e = import(&python, dir.path(), name, source).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, ImportError::Uncheckable { .. }), "{name}: {text}");
        assert!(
            text.contains(&format!("{name}.py: the problem's output 'output'"))
                && text.contains("is identically zero on the problem's own inputs")
                && text.contains("KernelBench's check would pass a kernel writing zeros")
                && text.contains("defect of the problem"),
            "{name}: {text}"
        );
        // Refused before anything is written: no task for `ksearch eval` to refuse later.
        assert!(!dir.path().join(name).exists(), "{name}");
    }
}

#[test]
fn a_model_that_draws_random_numbers_outside_dropout_is_refused() {
    let Some(python) = torch_python("random_forward", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let source = "import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * torch.rand_like(x)

def get_inputs():
    return [torch.randn(8, 16)]

def get_init_inputs():
    return []
";
    let e = import(&python, dir.path(), "noise", source).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ImportError::Uncheckable { .. }), "{text}");
    assert!(
        text.contains("Model.forward draws random numbers: torch's random number generator advanced")
            && text.contains("make forward deterministic"),
        "{text}"
    );
}

const DROPOUT: &str = "import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.matmul(x)), dim=1)

batch_size = 8
in_features = 64
out_features = 32

def get_inputs():
    return [torch.rand(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, 0.5]
";

#[test]
fn dropout_is_turned_off_in_the_reference_and_the_candidates_and_the_user_is_told() {
    let Some(python) = torch_python("dropout", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let imported = import(&python, dir.path(), "66_matmul_dropout_softmax", DROPOUT).unwrap();
    let task = &imported.task;
    let init = task.config.kernel.init.as_ref().unwrap();
    assert!(init.eval_dropout, "{init:?}");
    let toml = std::fs::read_to_string(dir.path().join("66_matmul_dropout_softmax/task.toml")).unwrap();
    assert!(toml.contains("eval_dropout = true") && toml.contains("# eval_dropout: the dropout modules (dropout)"));
    let def = &task.definition;
    assert!(def.reference.contains("_ksearch_m.eval()"), "{}", def.reference);
    assert!(def.description.as_deref().unwrap_or("").contains("Dropout is off"));
    assert!(
        imported.checks.iter().any(|c| c.starts_with("dropout is off")),
        "{:?}",
        imported.checks
    );

    // The seed (the problem's Model, dropout included) passes, since the harness puts its
    // dropout in eval mode as the reference does...
    let eval = eval_seed(task).unwrap();
    assert!(eval.passed(), "{:?}: {:?}\n{}", eval.status, eval.reason, eval.log);
    // ... and without that it would not: its training-mode dropout draws another mask than any
    // the reference could.
    let mut on = task.clone();
    if let Some(init) = on.config.kernel.init.as_mut() {
        init.eval_dropout = false;
    }
    let eval = eval_seed(&on).unwrap();
    assert!(
        !eval.passed() && eval.reason.as_deref().unwrap_or("").contains("differ beyond"),
        "training-mode dropout: {:?}: {:?}",
        eval.status,
        eval.reason
    );
}

#[test]
fn a_computed_input_is_drawn_from_the_range_it_has_in_the_problem() {
    let Some(python) = torch_python("computed_input", "torch, numpy") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let source = "import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction='batchmean')

batch_size = 8
dim = 64

def get_inputs():
    scale = torch.rand(())
    return [(torch.rand(batch_size, dim) * scale).softmax(dim=-1), torch.rand(batch_size, dim).softmax(dim=-1)]

def get_init_inputs():
    return []
";
    let imported = import(&python, dir.path(), "98_kldiv", source).unwrap();
    let task = &imported.task;
    for name in ["predictions", "targets"] {
        let Some(Distribution::Uniform { low, high }) = task.config.inputs.get(name) else {
            panic!("{name}: {:?}", task.config.inputs.get(name));
        };
        // Softmax over 64 columns of values in [0, 1): every entry is near 1/64.
        assert!(0.0 < *low && low < high && *high < 0.05, "{name}: [{low}, {high})");
        assert!(
            imported
                .checks
                .iter()
                .any(|c| c.starts_with(&format!("'{name}' is computed in get_inputs()")) && c.contains("sums to 1")),
            "{:?}",
            imported.checks
        );
    }
    let eval = eval_seed(task).unwrap();
    assert!(eval.passed(), "{:?}: {:?}\n{}", eval.status, eval.reason, eval.log);
    // With ksearch's trial distributions instead, the log of a negative input is NaN, and the
    // harness refuses the reference (what the first H200 pass saw for KernelBench's KLDivLoss).
    let mut drawn = task.clone();
    drawn.config.inputs.clear();
    let e = eval_seed(&drawn).unwrap_err().to_string();
    assert!(e.contains("has no finite value above atol"), "{e}");
}
