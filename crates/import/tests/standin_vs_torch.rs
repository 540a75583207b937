//! The stand-in for PyTorch against PyTorch itself: every sample problem (the fixtures, and small
//! problems written here that use the torch calls the stand-in provides) is imported with each,
//! and the tasks must agree in everything the stand-in is responsible for: axes, input and output
//! shapes and dtypes, the reference, the workloads, the seed, the kernel settings, the forbidden
//! patterns and the input draws. A problem the stand-in does not support must say so
//! (ImportError::NeedsTorch); giving other shapes, or failing otherwise, is a stand-in defect.
//!
//! What only PyTorch can add is left out of the comparison: tolerances derived from the outputs
//! measured at import, and draws of computed inputs from the range they had (both need values).
//!
//! Needs `$KSEARCH_PYTHON` naming an interpreter with PyTorch; skipped, saying so, without one
//! (CI installs no PyTorch); `KSEARCH_REQUIRE_TORCH=1` makes that a failure.

mod common;
use common::*;

use ksearch_import::{import_gpumode, import_kernelbench, ImportError, Imported, Options};
use std::path::{Path, PathBuf};

/// Small KernelBench problems over the torch calls the stand-in provides (standin_*.py).
const PROBLEMS: &[(&str, &str)] = &[
    (
        "elementwise_broadcast",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b, c):\n        \
         y = torch.where(a > 0, a * b, b - 1.5) / (c.abs() + 1)\n        \
         return torch.maximum(y, torch.zeros_like(y)).pow(2) + torch.tanh(a).sigmoid()\n\n\
         def get_inputs():\n    return [torch.randn(4, 1, 8), torch.randn(3, 1), torch.rand(8)]\n",
    ),
    (
        "reductions",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, dim):\n        \
         super().__init__()\n        self.dim = dim\n\n    def forward(self, x):\n        \
         m = x.max(dim=self.dim, keepdim=True).values\n        \
         return (x - m).exp().sum(dim=self.dim), x.mean(dim=(0, 2)), x.argmax(dim=-1), torch.logsumexp(x, dim=1), \
         x.std(dim=0), x.norm(dim=-1, keepdim=True), x.amax(dim=(1, 2))\n\n\
         def get_inputs():\n    return [torch.randn(5, 6, 7)]\n\ndef get_init_inputs():\n    return [1]\n",
    ),
    (
        "shapes",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, y):\n        \
         a = x.view(2, 3, -1).permute(2, 0, 1).contiguous()\n        \
         b = torch.cat([a, a], dim=1).transpose(0, 2).flatten(1)\n        \
         c = torch.stack([y, y * 2], dim=0).unsqueeze(-1).expand(2, 4, 5, 3).reshape(8, 15)\n        \
         d, e = x.chunk(2, dim=1)\n        return b, c, d[:, 1:, ::2], e.squeeze(), x.repeat(2, 1, 1)[..., None]\n\n\
         def get_inputs():\n    return [torch.randn(6, 4, 1), torch.randn(4, 5)]\n",
    ),
    (
        "products",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b, q, k):\n        \
         s = torch.einsum('bhqd,bhkd->bhqk', q, k) / 8 ** 0.5\n        \
         return a @ b, torch.bmm(a.unsqueeze(0).expand(3, 4, 6), b.unsqueeze(0).expand(3, 6, 5)), s.softmax(dim=-1), \
         torch.matmul(q, k.transpose(-2, -1))\n\n\
         def get_inputs():\n    return [torch.randn(4, 6), torch.randn(6, 5), torch.randn(2, 3, 7, 16), \
         torch.randn(2, 3, 9, 16)]\n",
    ),
    (
        "modules",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    \
         def __init__(self, vocab, dim, hidden):\n        super().__init__()\n        \
         self.embed = nn.Embedding(vocab, dim)\n        self.norm = nn.LayerNorm(dim)\n        \
         self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(0.0), nn.Linear(hidden, dim))\n\n    \
         def forward(self, tokens):\n        h = self.norm(self.embed(tokens))\n        \
         return F.log_softmax(self.mlp(h) + h, dim=-1)\n\n\
         def get_inputs():\n    return [torch.randint(0, 50, (2, 9))]\n\ndef get_init_inputs():\n    return [50, 16, 32]\n",
    ),
    (
        "dtypes",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, idx):\n        \
         h = x.half() * 2\n        return h, (h.float() + idx).to(torch.bfloat16), idx.long() * 3, (x > 0).int(), \
         x.double().sum()\n\n\
         def get_inputs():\n    return [torch.randn(4, 8), torch.randint(0, 10, (4, 8), dtype=torch.int32)]\n",
    ),
    (
        "dropout_and_scalars",
        "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, n, p):\n        \
         super().__init__()\n        self.lin = nn.Linear(n, n)\n        self.drop = nn.Dropout(p)\n\n    \
         def forward(self, x, scale: float):\n        return torch.softmax(self.drop(self.lin(x)) * scale, dim=1)\n\n\
         def get_inputs():\n    return [torch.rand(4, 16), 0.5]\n\ndef get_init_inputs():\n    return [16, 0.25]\n",
    ),
    (
        "pad_and_convolutions",
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\nclass Model(nn.Module):\n    \
         def forward(self, x, w1, img, w2, vol, w3):\n        \
         a = F.conv1d(F.pad(x, (w1.shape[-1] - 1, 0)), w1, groups=x.shape[1])\n        \
         b = F.conv2d(img, w2, stride=2, padding=1, dilation=(1, 2), groups=2)\n        \
         c = F.conv3d(vol, w3, padding='same')\n        \
         return a, b, c, F.pad(img, (1, 2, -1, 0)), F.conv2d(img[0], w2[:, :, 1:, :], padding=(0, 1), groups=2)\n\n\
         def get_inputs():\n    return [torch.randn(2, 4, 16), torch.randn(4, 1, 3), torch.randn(2, 6, 9, 13), \
         torch.randn(8, 3, 3, 3), torch.randn(1, 2, 4, 5, 6), torch.randn(3, 2, 3, 1, 2)]\n",
    ),
];

enum Source {
    KernelBench(PathBuf),
    GpuMode(PathBuf),
}

fn import(source: &Source, out: &Path, python: &Path, stand_in: bool) -> Result<Imported, ImportError> {
    let mut opts = Options::new(out);
    opts.python = Some(python.to_path_buf());
    opts.stand_in = stand_in;
    match source {
        Source::KernelBench(f) => import_kernelbench(f, &opts),
        Source::GpuMode(d) => import_gpumode(d, &opts),
    }
}

/// What both engines must agree on, as JSON (so that a difference prints readably).
fn comparable(imported: &Imported) -> serde_json::Value {
    let task = &imported.task;
    let def = serde_json::to_value(&task.definition).unwrap();
    let inputs: serde_json::Map<String, serde_json::Value> = task
        .config
        .inputs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap()))
        .collect();
    serde_json::json!({
        "definition": def,
        "workloads": serde_json::to_value(&task.workloads).unwrap(),
        "seed": task.seed.as_ref().map(|s| s.content.clone()),
        "kernel": serde_json::to_value(&task.config.kernel).unwrap(),
        "forbidden": serde_json::to_value(&task.config.checks.forbidden).unwrap(),
        "inputs": inputs,
    })
}

#[test]
fn the_stand_in_gives_the_tasks_pytorch_gives() {
    let Some(python) = torch_python("the stand-in's differential test", "torch") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut sources: Vec<(String, Source)> = ["12_Gemm_ReLU", "23_Softmax", "94_MSELoss_Sample"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                Source::KernelBench(fixture(&format!("kernelbench/{n}.py"))),
            )
        })
        .collect();
    for name in ["grayscale_py", "grouped_matmul_py"] {
        sources.push((name.into(), Source::GpuMode(fixture(&format!("gpumode/{name}")))));
    }
    for (name, text) in PROBLEMS {
        let file = dir.path().join(format!("{name}.py"));
        std::fs::write(&file, text).unwrap();
        sources.push((name.to_string(), Source::KernelBench(file)));
    }
    let mut compared = 0;
    for (name, source) in &sources {
        let with_torch = import(source, &dir.path().join(format!("{name}.torch")), &python, false)
            .unwrap_or_else(|e| panic!("{name}: PyTorch could not import the problem: {e}"));
        assert!(with_torch.engine.starts_with("torch "), "{name}: {}", with_torch.engine);
        let standin = match import(source, &dir.path().join(format!("{name}.standin")), &python, true) {
            Ok(i) => i,
            Err(e @ ImportError::NeedsTorch { .. }) => {
                eprintln!("{name}: the stand-in does not support it: {e}");
                continue;
            }
            Err(e) => panic!("{name}: PyTorch imports it, the stand-in fails: {e}"),
        };
        let mut want = comparable(&with_torch);
        // Draws of computed inputs from their observed range need values, which the stand-in has
        // not; the report says which inputs those are.
        let observed: Vec<String> = with_torch
            .task
            .config
            .inputs
            .keys()
            .filter(|k| {
                with_torch
                    .checks
                    .iter()
                    .any(|c| c.starts_with(&format!("'{k}' is computed in")))
            })
            .cloned()
            .collect();
        for k in &observed {
            want["inputs"].as_object_mut().unwrap().remove(k);
        }
        let got = comparable(&standin);
        assert_eq!(
            got, want,
            "{name}: the stand-in's task differs from PyTorch's (left: stand-in, right: torch)"
        );
        compared += 1;
    }
    // Every problem here is one the stand-in is meant to support.
    assert_eq!(compared, sources.len(), "some problems were not compared");
}
