//! The GPU tasks' static checks: each task's own seed passes them; the framework calls its
//! baselines make (SDPA, F.rms_norm, torch.softmax), submitted as a candidate, are rejected;
//! a Triton kernel written with tl.dot, tl.softmax and @triton.jit passes.

use ksearch_eval::check_sources;
use ksearch_spec::{SourceFile, Task};

fn source(path: &str, content: &str) -> Vec<SourceFile> {
    vec![SourceFile {
        path: path.into(),
        content: content.into(),
    }]
}

const GPU_TASKS: [&str; 5] = [
    "attention_prefill",
    "gqa_paged_decode",
    "mamba_scan",
    "rmsnorm_llm",
    "softmax_llm",
];

#[test]
fn every_gpu_seed_passes_its_task_checks() {
    for name in GPU_TASKS {
        let task = Task::load_builtin(name).unwrap();
        let seed = task.seed.clone().unwrap();
        let rejection = check_sources(task.config.kernel.language, &[seed], &task.config);
        assert!(rejection.is_none(), "{name}: {}", rejection.unwrap());
    }
}

#[test]
fn baselines_that_call_the_framework_op_would_be_rejected_as_candidates() {
    // Baselines are trusted and exempt; the same code from a candidate is the hack the checks
    // exist for. mamba_scan's baseline is built from element-wise ops and is not a library call.
    for (name, baseline, expected) in [
        ("attention_prefill", "sdpa_cudnn", "scaled_dot_product_attention"),
        ("attention_prefill", "sdpa_flash", "scaled_dot_product_attention"),
        ("gqa_paged_decode", "torch_gather_sdpa", "scaled_dot_product_attention"),
        ("rmsnorm_llm", "torch_rms_norm", "rms_norm"),
        ("rmsnorm_llm", "hf_llama", ""),
        ("softmax_llm", "torch_softmax", "torch.softmax"),
    ] {
        let task = Task::load_builtin(name).unwrap();
        let b = task.baseline(baseline).unwrap();
        let rejection = check_sources(ksearch_spec::Language::Python, &b.sources, &task.config);
        if expected.is_empty() {
            // hf_llama normalises with element-wise ops (pow, mean, rsqrt): allowed.
            assert!(rejection.is_none(), "{name}/{baseline}: {}", rejection.unwrap());
            continue;
        }
        let r = rejection.unwrap_or_else(|| panic!("{name}/{baseline} passed the checks"));
        assert!(r.matched.contains(expected), "{name}/{baseline}: {r}");
    }
}

#[test]
fn framework_ops_in_python_candidates_are_rejected() {
    let cases = [
        (
            "attention_prefill",
            "def run(q, k, v, causal):\n    s = torch.matmul(q, k.transpose(-1, -2))\n",
        ),
        (
            "attention_prefill",
            "def run(q, k, v, causal):\n    s = (q @ k.transpose(-1, -2))\n",
        ),
        (
            "attention_prefill",
            "import torch.nn.functional as F\ndef run(q, k, v, c):\n    p = F.softmax(q, -1)\n",
        ),
        (
            "gqa_paged_decode",
            "def run(*a):\n    return torch.einsum('hd,nd->hn', a[0], a[1])\n",
        ),
        ("gqa_paged_decode", "import flashinfer\n"),
        (
            "mamba_scan",
            "from mamba_ssm.ops.selective_scan_interface import selective_scan_fn\n",
        ),
        ("mamba_scan", "def run(*a):\n    return torch.cumsum(a[0], dim=-1)\n"),
        (
            "rmsnorm_llm",
            "def run(x, w):\n    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w)\n",
        ),
        ("softmax_llm", "def run(x):\n    return torch.special.softmax(x, -1)\n"),
    ];
    for (name, code) in cases {
        let task = Task::load_builtin(name).unwrap();
        for language in [ksearch_spec::Language::Python, ksearch_spec::Language::Triton] {
            assert!(
                check_sources(language, &source("k.py", code), &task.config).is_some(),
                "{name} ({language}) accepted:\n{code}"
            );
        }
    }
}

#[test]
fn a_triton_kernel_with_its_own_primitives_passes() {
    let kernel = r#"
import torch
import triton
import triton.language as tl


@triton.jit
def _attn(q_ptr, k_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    q = tl.load(q_ptr + offs[:, None] * BLOCK + offs[None, :])
    k = tl.load(k_ptr + offs[:, None] * BLOCK + offs[None, :])
    s = tl.dot(q, tl.trans(k))
    p = tl.softmax(s)
    tl.store(o_ptr + offs[:, None] * BLOCK + offs[None, :], p)


def run(q, k, v, causal):
    out = torch.empty_like(q)
    _attn[(1,)](q, k, out, q.shape[-2], BLOCK=64)
    return out
"#;
    for name in GPU_TASKS {
        let task = Task::load_builtin(name).unwrap();
        let rejection = check_sources(ksearch_spec::Language::Triton, &source("k.py", kernel), &task.config);
        assert!(rejection.is_none(), "{name}: {}", rejection.unwrap());
    }
}
