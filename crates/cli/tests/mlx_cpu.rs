//! `ksearch eval` of MLX candidates on MLX's CPU device, end to end: the real binary, the real
//! harness, the built-in task mlx_mamba_step, and MLX's CPU build (`pip install
//! 'mlx[cpu]==0.32.4'`, which .ci/run installs). MLX's CPU device has no custom kernels, so the
//! candidates are Python launchers of MLX operations; the same path (request, harness, MLX
//! arrays, the reference in MLX operations, timing) carries kernels on a GPU.
//!
//! Where the harness's Python cannot import MLX these tests skip with a printed reason, unless
//! KSEARCH_REQUIRE_MLX=1 (set by .ci/run) makes that a failure.

mod common;
use common::*;

/// One decode step in MLX operations, written from the task's description (no matmul or `@`,
/// which the task's checks refuse).
const STEP: &str = r#"import mlx.core as mx


def mlx_mamba_step(u, delta, A, B, C, D, z, delta_bias, state):
    x = u.astype(mx.float32)
    v = delta.astype(mx.float32) + delta_bias
    dt = mx.maximum(v, 0.0) + mx.log1p(mx.exp(-mx.abs(v)))  # softplus
    new_state = (mx.exp(dt[:, :, None] * A) * state
                 + (dt * x)[:, :, None] * B.astype(mx.float32)[:, None, :])
    y = mx.sum(new_state * C.astype(mx.float32)[:, None, :], axis=-1) + D * x
    g = z.astype(mx.float32)
    return (y * g * mx.sigmoid(g)).astype(mx.float16), new_state
"#;

/// Whether the interpreter ksearch runs the harness with imports MLX; None (after printing why)
/// when the test should skip.
fn mlx_python() -> Option<()> {
    let python = ksearch_eval::harness::python_with_numpy(&|m| eprintln!("{m}")).expect("a Python with NumPy");
    let probe = std::process::Command::new(&python)
        .args(["-c", "import mlx.core"])
        .output()
        .expect("cannot start the harness's Python");
    if probe.status.success() {
        return Some(());
    }
    let reason = format!(
        "{} cannot import mlx.core (pip install 'mlx[cpu]==0.32.4'): {}",
        python.display(),
        String::from_utf8_lossy(&probe.stderr).lines().last().unwrap_or("")
    );
    if std::env::var("KSEARCH_REQUIRE_MLX").is_ok_and(|v| v == "1") {
        panic!("KSEARCH_REQUIRE_MLX=1 but {reason}");
    }
    eprintln!("skipping: {reason}");
    None
}

fn eval_step(source: &str) -> serde_json::Value {
    let (_dir, path) = write_temp("launcher.py", source);
    let r = ksearch(&[
        "eval",
        "mlx_mamba_step",
        path.to_str().unwrap(),
        "--device",
        "mlx:cpu",
        "--json",
        "--seed",
        "5",
    ]);
    assert!(r.code == 0 || r.code == 1, "{}\n{}", r.stdout, r.stderr);
    r.json()
}

#[test]
fn a_launcher_of_mlx_operations_is_evaluated_on_mlx_cpu() {
    if mlx_python().is_none() {
        return;
    }
    let j = eval_step(STEP);
    assert_eq!(j["status"], "passed", "{j:#}");
    let workloads = j["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 4, "every workload of the task");
    for w in workloads {
        assert_eq!(w["status"], "passed", "{w:#}");
        assert!(w["timing"]["candidate"]["median_ns"].as_f64().unwrap() > 0.0);
        assert!(w["timing"]["speedup"].as_f64().unwrap() > 0.0);
    }
    let p = &j["provenance"];
    assert_eq!(
        (p["backend"].as_str(), p["device"].as_str()),
        (Some("mlx"), Some("mlx:cpu"))
    );
    let device = &p["environment"]["device"];
    assert_eq!(
        (device["kind"].as_str(), device["device"].as_str()),
        (Some("mlx"), Some("cpu"))
    );
    assert!(device["mlx"].as_str().is_some_and(|v| !v.is_empty()), "{device}");
    assert!(
        p["environment"]["compiler"].as_str().unwrap().starts_with("MLX "),
        "{}",
        p["environment"]["compiler"]
    );
}

#[test]
fn a_wrong_step_fails_against_the_reference_and_mlx_products_are_refused() {
    if mlx_python().is_none() {
        return;
    }
    // The recurrence dropped: the old state never enters the new one.
    let wrong = STEP.replace("mx.exp(dt[:, :, None] * A) * state", "0.0 * state");
    assert_ne!(wrong, STEP);
    let j = eval_step(&wrong);
    assert_eq!(j["status"], "incorrect_numerical", "{j:#}");
    for w in j["workloads"].as_array().unwrap() {
        assert_eq!(w["status"], "incorrect_numerical", "{w:#}");
    }
    // The task's checks keep MLX's products out of a candidate, before anything runs.
    let delegated = STEP.replace(
        "mx.sum(new_state * C.astype(mx.float32)[:, None, :], axis=-1)",
        "(new_state @ C.astype(mx.float32)[:, :, None])[:, :, 0]",
    );
    assert_ne!(delegated, STEP);
    let j = eval_step(&delegated);
    assert_ne!(j["status"], "passed", "{j:#}");
    assert!(j["reason"].as_str().unwrap_or("").contains("@"), "{j:#}");
}

#[test]
fn a_launch_spec_is_checked_before_it_needs_a_gpu() {
    if mlx_python().is_none() {
        return;
    }
    // The task's seed asking for 2048 threads per threadgroup: on MLX's CPU device (no kernels)
    // its compile stage fails on the thread limit, not on the missing GPU.
    let seed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tasks/mlx_mamba_step/seed.toml"),
    )
    .unwrap();
    assert!(seed.contains("threadgroup = [256, 1, 1]"), "{seed}");
    let (_dir, path) = write_temp(
        "seed.toml",
        &seed.replace("threadgroup = [256, 1, 1]", "threadgroup = [2048, 1, 1]"),
    );
    let r = ksearch(&[
        "eval",
        "mlx_mamba_step",
        path.to_str().unwrap(),
        "--device",
        "mlx:cpu",
        "--json",
    ]);
    let j = r.json();
    assert_eq!(j["status"], "compile_error", "{j:#}");
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("threadgroup: [2048, 1, 1] is 2048 threads"), "{reason}");
    assert!(reason.contains("at most 1024"), "{reason}");
    assert!(!reason.contains("needs a GPU"), "{reason}");
    // The seed as it is: nothing wrong with it but the device.
    let r = ksearch(&["eval", "mlx_mamba_step", "--device", "mlx:cpu", "--json"]);
    let j = r.json();
    assert_eq!(j["status"], "compile_error", "{j:#}");
    assert!(j["reason"].as_str().unwrap().contains("a kernel needs a GPU"), "{j:#}");
}
