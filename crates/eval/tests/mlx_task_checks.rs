//! The MLX tasks' static checks: each seed (a launch spec with CUDA and Metal bodies) passes its
//! task's checks; the baselines, submitted as candidates, are rejected for the MLX operations
//! they delegate to; a launcher that builds its own mx.fast kernel passes.

use ksearch_eval::check_sources;
use ksearch_spec::{SourceFile, Task};

const MLX_TASKS: [&str; 3] = ["mlx_attention", "mlx_mamba_scan", "mlx_mamba_step"];

#[test]
fn every_mlx_seed_passes_its_task_checks() {
    for name in MLX_TASKS {
        let task = Task::load_builtin(name).unwrap();
        let seed = task.seed.clone().unwrap();
        let rejection = check_sources(task.config.kernel.language, &[seed], &task.config);
        assert!(rejection.is_none(), "{name}: {}", rejection.unwrap());
    }
}

#[test]
fn the_baselines_would_be_rejected_as_candidates() {
    for (name, baseline, expected) in [
        ("mlx_attention", "mlx_sdpa", "scaled_dot_product_attention"),
        ("mlx_mamba_scan", "mlx_lm_loop", "@"),
        ("mlx_mamba_step", "mlx_lm_ssm_step", "@"),
    ] {
        let task = Task::load_builtin(name).unwrap();
        let b = task.baseline(baseline).unwrap();
        let r = check_sources(ksearch_spec::Language::Mlx, &b.sources, &task.config)
            .unwrap_or_else(|| panic!("{name}/{baseline} passed the checks"));
        assert!(r.matched.contains(expected), "{name}/{baseline}: {r}");
    }
}

#[test]
fn a_launcher_of_its_own_kernel_passes_and_mlx_products_do_not() {
    let task = Task::load_builtin("mlx_attention").unwrap();
    let own = "import mlx.core as mx\n\
               # not mx.fast.scaled_dot_product_attention: our own kernel\n\
               _k = mx.fast.cuda_kernel(name='attn', input_names=['q', 'k', 'v', 'causal'],\n\
               \x20   output_names=['out'], source='out[0] = q[0];')\n\
               def mlx_attention(q, k, v, causal):\n\
               \x20   return _k(inputs=[q, k, v, causal], grid=(1, 1, 1), threadgroup=(1, 1, 1),\n\
               \x20             output_shapes=[q.shape], output_dtypes=[q.dtype])[0]\n";
    let file = |content: &str| {
        vec![SourceFile {
            path: "launcher.py".into(),
            content: content.into(),
        }]
    };
    assert_eq!(
        check_sources(ksearch_spec::Language::Mlx, &file(own), &task.config),
        None
    );
    for cheat in [
        "import mlx.core as mx\ndef f(q, k, v, c):\n    return mx.softmax(mx.matmul(q, k), axis=-1)\n",
        "def f(q, k, v, c):\n    return (q @ k) @ v\n",
    ] {
        assert!(
            check_sources(ksearch_spec::Language::Mlx, &file(cheat), &task.config).is_some(),
            "{cheat}"
        );
    }
}
