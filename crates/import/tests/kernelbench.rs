//! `ksearch import kernelbench` on sample problems (written for these tests), with the stand-in.

mod common;
use common::*;

use ksearch_import::{import_kernelbench, ImportError};
use ksearch_spec::{Axis, Calling, DType, Distribution, SourceFile};

#[test]
fn gemm_relu_becomes_a_task_whose_seed_is_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gemm");
    let imported = import_kernelbench(&fixture("kernelbench/12_Gemm_ReLU.py"), &standin(&out)).unwrap();
    assert_eq!(imported.engine, "stand-in");
    let task = &imported.task;
    let def = &task.definition;
    assert_eq!(def.name, "12_Gemm_ReLU");
    // Axes are const, named after the module's constants.
    let axes: Vec<(&str, i64)> = def
        .axes
        .iter()
        .map(|(n, a)| match a {
            Axis::Const { value, .. } => (n.as_str(), *value),
            Axis::Var { .. } => panic!("{n} is var"),
        })
        .collect();
    assert_eq!(axes, [("batch_size", 32), ("in_features", 64), ("out_features", 48)]);
    assert_eq!(def.inputs.keys().collect::<Vec<_>>(), ["x"], "forward's parameter name");
    assert_eq!(def.inputs["x"].dims(), ["batch_size", "in_features"]);
    assert_eq!(def.inputs["x"].dtype, DType::Float32);
    assert_eq!(def.outputs["output"].dims(), ["batch_size", "out_features"]);
    assert!(def.reference.contains("def run(x):") && def.reference.contains("Model(*[64, 48])"));
    // Linear's weight and bias move with the model to the device the harness gives the inputs
    // on (a CPU-built model called with GPU inputs fails: "mat1 is on cuda:0, ... cpu").
    assert!(
        def.reference
            .contains("_ksearch_model = _ksearch_model.to(_ksearch_device)"),
        "{}",
        def.reference
    );
    assert_eq!(task.workloads.len(), 1);

    let k = &task.config.kernel;
    assert_eq!(
        (k.language.as_str(), k.entry.as_deref(), k.calling),
        ("python", Some("ModelNew"), Calling::Returns)
    );
    let init = k.init.as_ref().unwrap();
    assert_eq!(
        (init.args.clone(), init.seed),
        (vec![serde_json::json!(64), serde_json::json!(48)], 42)
    );
    let seed = task.seed.as_ref().unwrap();
    assert!(seed.content.contains("class ModelNew(nn.Module)") && seed.content.contains("super(ModelNew, self)"));
    assert_eq!(task.baselines.len(), 1);
    assert_eq!(task.baselines[0].spec.entry_point, "pytorch.py::Model");
    // randn inputs keep ksearch's trial distributions: no override.
    assert!(task.config.inputs.is_empty());
    // The uv-style report lists what was written and what to check.
    let files: Vec<&str> = imported.written.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        [
            "definition.json",
            "workloads.jsonl",
            "task.toml",
            "seed.py",
            "baselines/pytorch.py"
        ]
    );
    assert!(imported.checks.iter().any(|c| c.contains("stand-in")));

    // The seed passes the task's static checks; cheats do not.
    let check = |code: &str| {
        ksearch_eval::check_sources(
            ksearch_spec::Language::Python,
            &[SourceFile {
                path: "k.py".into(),
                content: code.into(),
            }],
            &task.config,
        )
    };
    assert_eq!(check(&seed.content), None, "the seed must pass its own checks");
    for cheat in [
        "from problem import Model\nModelNew = Model\n",
        "import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)\n",
        "import torch\nclass ModelNew:\n    def forward(self, x):\n        try:\n            return kernel(x)\n        except Exception:\n            return x\n",
        "torch.backends.cuda.matmul.allow_tf32 = True\n",
        "fast = torch.compile(model)\n",
    ] {
        assert!(check(cheat).is_some(), "not rejected: {cheat}");
    }
    // The problem's own operations stay allowed (the seed uses them) and the report says so.
    assert_eq!(
        check("y = torch.nn.functional.linear(x, w)\nz = torch.matmul(a, b)\n"),
        None
    );
    assert!(imported.checks.iter().any(|c| c.contains("matrix product")));

    run_generated(&out);
}

#[test]
fn softmax_forbids_nothing_it_uses_and_reruns_into_a_used_folder_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("softmax");
    let file = fixture("kernelbench/23_Softmax.py");
    let imported = import_kernelbench(&file, &standin(&out)).unwrap();
    let def = &imported.task.definition;
    assert_eq!(def.inputs["x"].dims(), ["batch_size", "dim"]);
    assert_eq!(def.outputs["output"].dims(), ["batch_size", "dim"]);
    let init = imported.task.config.kernel.init.as_ref().unwrap();
    assert!(init.args.is_empty());
    let forbidden: Vec<&str> = imported
        .task
        .config
        .checks
        .forbidden
        .iter()
        .map(|f| f.pattern.as_str())
        .collect();
    assert!(!forbidden.iter().any(|p| p.contains("softmax")), "{forbidden:?}");
    assert!(forbidden.iter().any(|p| p.contains("torch\\.(matmul")), "{forbidden:?}");
    run_generated(&out);

    let again = import_kernelbench(&file, &standin(&out)).unwrap_err();
    assert!(matches!(again, ImportError::OutExists { .. }), "{again}");
    assert!(again.to_string().contains("--force"), "{again}");
    let mut opts = standin(&out);
    opts.force = true;
    opts.name = Some("softmax rows".into());
    let imported = import_kernelbench(&file, &opts).unwrap();
    assert_eq!(imported.task.definition.name, "softmax_rows");
}

#[test]
fn inputs_made_with_rand_and_randint_keep_their_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hist.py");
    std::fs::write(
        &file,
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, bins):\n        \
         super().__init__()\n        self.bins = bins\n\n    def forward(self, values, idx, scale: float):\n        \
         return values[idx.shape[0] - 1:] * scale\n\nN = 128\nBINS = 10\n\ndef get_inputs():\n    \
         return [torch.rand(N, 4), torch.randint(0, BINS, (N,)), 0.5]\n\ndef get_init_inputs():\n    return [BINS]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let imported = import_kernelbench(&file, &standin(&out)).unwrap();
    let task = &imported.task;
    assert_eq!(
        task.config.inputs["values"],
        Distribution::Uniform { low: 0.0, high: 1.0 }
    );
    assert_eq!(
        task.config.inputs["idx"],
        Distribution::Randint {
            low: ksearch_spec::Bound::Value(0),
            high: ksearch_spec::Bound::Value(10)
        }
    );
    assert_eq!(task.definition.inputs["idx"].dtype, DType::Int64);
    assert!(task.definition.inputs["scale"].is_scalar());
    assert_eq!(
        serde_json::to_value(&task.workloads[0].inputs["scale"]).unwrap(),
        serde_json::json!({"type": "scalar", "value": 0.5})
    );
    run_generated(&out);
}

#[test]
fn bad_problems_give_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let case = |name: &str, code: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, code).unwrap();
        let e = import_kernelbench(&file, &standin(&dir.path().join(format!("out_{name}")))).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with(&file.display().to_string()), "{text}");
        (e, text)
    };
    let (e, text) = case(
        "no_model.py",
        "import torch\n\ndef get_inputs():\n    return [torch.randn(2)]\n",
    );
    assert!(
        matches!(e, ImportError::Problem { .. }) && text.contains("defines no class Model"),
        "{text}"
    );

    let (_, text) = case(
        "no_inputs.py",
        "import torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n",
    );
    assert!(text.contains("defines no get_inputs()"), "{text}");

    let (e, text) = case(
        "conv.py",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        \
         self.conv = nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n        return self.conv(x)\n\n\
         def get_inputs():\n    return [torch.randn(1, 3, 8, 8)]\n\ndef get_init_inputs():\n    return []\n",
    );
    assert!(matches!(e, ImportError::NeedsTorch { .. }), "{text}");
    assert!(
        text.contains("torch.nn.Conv2d") && text.contains("install PyTorch to import this problem"),
        "{text}"
    );

    let (e, text) = case(
        "raises.py",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x @ x\n\n\
         def get_inputs():\n    return [torch.randn(3, 4)]\n",
    );
    assert!(matches!(e, ImportError::Raised { .. }), "{text}");
    assert!(
        text.contains("Model.forward raised RuntimeError") && text.contains("3x4 and 3x4"),
        "{text}"
    );

    let (_, text) = case("syntax.py", "class Model(:\n");
    assert!(text.contains("cannot be loaded: SyntaxError"), "{text}");

    let (e, text) = case(
        "dict.py",
        "import torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n\n\
         def get_inputs():\n    return [{'a': 1}]\n",
    );
    assert!(
        matches!(e, ImportError::Unsupported { .. }) && text.contains("get_inputs()[0] is a dict"),
        "{text}"
    );

    let missing = dir.path().join("absent.py");
    let e = import_kernelbench(&missing, &standin(&dir.path().join("o"))).unwrap_err();
    assert!(e.to_string().starts_with(&missing.display().to_string()), "{e}");
}

#[test]
fn a_loss_becomes_a_task_with_a_0d_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mse");
    let imported = import_kernelbench(&fixture("kernelbench/94_MSELoss_Sample.py"), &standin(&out))
        .unwrap_or_else(|e| panic!("{e}"));
    let def = &imported.task.definition;
    let output = &def.outputs["output"];
    assert_eq!(output.shape.as_deref(), Some(&[][..]), "a 0-d array, not a scalar");
    let written = std::fs::read_to_string(out.join("definition.json")).unwrap();
    assert!(written.contains("\"shape\": []"), "{written}");
    run_generated(&out);
}

#[test]
fn dropout_found_by_the_stand_in_is_turned_off_as_with_pytorch() {
    // The stand-in finds dropout modules by the names PyTorch's probe uses, so both engines write
    // the same task (bench/import_check.sh compares them); Dropout(0.0) changes nothing and is
    // left alone. KernelBench's level2/66_Matmul_Dropout_Softmax, shrunk.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("drop.py");
    std::fs::write(
        &file,
        "import torch\nimport torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, p):\n        \
         super().__init__()\n        self.drop = nn.Dropout(p)\n        self.keep = nn.Dropout(0.0)\n\n    \
         def forward(self, x):\n        return self.keep(self.drop(x))\n\nclass Model(nn.Module):\n    \
         def __init__(self, n, p):\n        super().__init__()\n        self.matmul = nn.Linear(n, n)\n        \
         self.blocks = nn.ModuleList([Block(p)])\n\n    def forward(self, x):\n        \
         return torch.softmax(self.blocks[0](self.matmul(x)), dim=1)\n\ndef get_inputs():\n    \
         return [torch.rand(4, 16)]\n\ndef get_init_inputs():\n    return [16, 0.2]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let imported = import_kernelbench(&file, &standin(&out)).unwrap();
    let init = imported.task.config.kernel.init.as_ref().unwrap();
    assert!(init.eval_dropout);
    let dropout = imported
        .checks
        .iter()
        .find(|c| c.starts_with("dropout is off"))
        .unwrap_or_else(|| panic!("{:?}", imported.checks));
    assert!(dropout.contains("(blocks.0.drop)"), "{dropout}");
    let toml = std::fs::read_to_string(out.join("task.toml")).unwrap();
    assert!(toml.contains("seed = 42, eval_dropout = true }"), "{toml}");
    // The reference turns its dropout off; run_generated runs it (stand-in) as the harness would.
    assert!(imported.task.definition.reference.contains("_ksearch_m.eval()"));
    run_generated(&out);

    // Without dropout that acts, nothing changes.
    std::fs::write(
        &file,
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        \
         super().__init__()\n        self.drop = nn.Dropout(p=0.0)\n\n    def forward(self, x):\n        \
         return self.drop(x)\n\ndef get_inputs():\n    return [torch.randn(4)]\n",
    )
    .unwrap();
    let imported = import_kernelbench(&file, &standin(&dir.path().join("still"))).unwrap();
    assert!(!imported.task.config.kernel.init.as_ref().unwrap().eval_dropout);
    assert!(!imported.task.definition.reference.contains("_ksearch_m.eval()"));
}
