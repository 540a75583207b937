//! `ksearch eval` end to end: the real binary, the real harness, real C kernels.
//! Each test guards one rule of docs/threat-model.md and fails without it.

mod common;
use common::*;

#[test]
fn correct_kernel_passes_with_timing() {
    let r = eval_tiny(SOFTMAX_OK, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "passed");
    for w in j["workloads"].as_array().unwrap() {
        assert_eq!(w["status"], "passed");
        let t = &w["timing"];
        assert!(t["candidate"]["median_ns"].as_f64().unwrap() > 0.0);
        assert!(t["candidate_ns"].as_array().unwrap().len() >= 3, "raw samples are kept");
        assert!(t["speedup"].as_f64().unwrap() > 0.0);
        assert_eq!(w["correctness"]["trials"], 2);
    }
    assert!(j["speedup"].as_f64().unwrap() > 0.0);
    assert_eq!(j["provenance"]["seed"], 7);
}

#[test]
fn human_table_and_verdict() {
    let (_d, path) = write_temp("kernel.c", SOFTMAX_OK);
    let task = fixture("tiny_softmax");
    let r = ksearch(&["eval", task.to_str().unwrap(), path.to_str().unwrap(), "--seed", "1"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("speedup"), "{}", r.stdout);
    assert!(r.stdout.contains("small") && r.stdout.contains("wide"));
    assert!(r.stdout.contains("passed: 2/2 workloads"), "{}", r.stdout);
}

#[test]
fn off_by_one_is_incorrect_numerical() {
    // Skips the last element of every row's normalisation.
    let kernel = SOFTMAX_OK.replace(
        "for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);",
        "for (int64_t j = 0; j < N - 1; j++) o[j] = (float)(o[j] / s);",
    );
    assert_ne!(kernel, SOFTMAX_OK);
    let r = eval_tiny(&kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "incorrect_numerical");
    assert_eq!(j["workloads"][0]["status"], "incorrect_numerical");
    assert!(j["reason"].as_str().unwrap().contains("output 'y'"), "{}", j["reason"]);
}

#[test]
fn writing_half_the_output_is_caught_by_poison() {
    // Correct values, but only for the first half of the rows: the rest keeps whatever the
    // buffer held. Without poisoning, a zero-filled buffer could still be "close" for rows of
    // tiny values; with NaN poison every unwritten element fails.
    let kernel = SOFTMAX_OK.replace("for (int64_t i = 0; i < M; i++)", "for (int64_t i = 0; i < M / 2; i++)");
    let r = eval_tiny(&kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "incorrect_numerical");
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("nan") || reason.contains("NaN"), "{reason}");
}

#[test]
fn mutating_an_input_is_caught() {
    let kernel = SOFTMAX_OK
        .replace("void softmax(const float *x,", "void softmax(float *x,")
        .replace(
            "for (int64_t i = 0; i < M; i++) {",
            "x[0] = 0.0f;\n    for (int64_t i = 0; i < M; i++) {",
        );
    // Reading x[0] after zeroing it changes row 0's result only slightly in some trials; the
    // input check must catch it regardless of the outputs.
    let r = eval_tiny(&kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("modified its input 'x'"), "{reason}");
}

#[test]
fn an_input_the_task_declares_writable_may_be_written_and_no_other() {
    // GPU MODE's output buffers come among the inputs; a task lists them in
    // [kernel].writable_inputs. Writing into x then passes; the check stays on for the rest.
    let kernel = SOFTMAX_OK
        .replace("void softmax(const float *x,", "void softmax(float *x,")
        .replace(
            "        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);\n    }",
            "        for (int64_t j = 0; j < N; j++) o[j] = (float)(o[j] / s);\n    }\n    x[0] = 0.0f;",
        );
    let plain = eval_tiny(&kernel, &[]);
    let reason = plain.json()["reason"].as_str().unwrap_or("").to_string();
    assert!(reason.contains("modified its input 'x'"), "{reason}\n{kernel}");
    let task = copy_fixture("tiny_softmax");
    let toml = task.path().join("task.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        text.replace("[kernel]\n", "[kernel]\nwritable_inputs = [\"x\"]\n"),
    )
    .unwrap();
    let (_dir, path) = write_temp("kernel.c", &kernel);
    let r = ksearch(&[
        "eval",
        task.path().to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "7",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "passed");
    // A name that is not an input is the task's mistake, named by field.
    std::fs::write(
        &toml,
        text.replace("[kernel]\n", "[kernel]\nwritable_inputs = [\"z\"]\n"),
    )
    .unwrap();
    let r = ksearch(&["eval", task.path().to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("kernel.writable_inputs[0]") && r.stderr.contains("no input 'z'"),
        "{}",
        r.stderr
    );
}

#[test]
fn segfault_is_runtime_error_naming_the_signal() {
    let kernel = "#include <stdint.h>\nvoid softmax(const float *x, float *y, int64_t M, int64_t N) {\n  volatile float *p = (float *)0; p[M] = 1.0f; (void)x; (void)y; (void)N;\n}\n";
    let r = eval_tiny(kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "runtime_error");
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("SIGSEGV") && reason.contains("workload 0"), "{reason}");
}

#[test]
fn infinite_loop_times_out_and_leaves_no_process() {
    let marker = format!("KSEARCH_TEST_MARKER={}", std::process::id());
    let (k, v) = marker.split_once('=').unwrap();
    let kernel = "#include <stdint.h>\nvoid softmax(const float *x, float *y, int64_t M, int64_t N) {\n  volatile int spin = 1; while (spin) {} (void)x; (void)y; (void)M; (void)N;\n}\n";
    let (_d, path) = write_temp("kernel.c", kernel);
    let task = fixture("tiny_softmax");
    let r = ksearch_env(
        &[
            "eval",
            task.to_str().unwrap(),
            path.to_str().unwrap(),
            "--json",
            "--timeout",
            "3",
        ],
        &[(k, v)],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "timeout");
    assert!(j["reason"].as_str().unwrap().contains("3 s limit"), "{}", j["reason"]);
    assert!(r.elapsed.as_secs_f64() < 3.0 + 2.0, "took {:?}", r.elapsed);
    assert_eq!(
        process_with_env_marker(&marker),
        None,
        "a process of the evaluation survived"
    );
}

#[test]
fn syntax_error_is_compile_error_with_compiler_message() {
    let kernel =
        "#include <stdint.h>\nvoid softmax(const float *x, float *y, int64_t M, int64_t N) {\n  this is not C;\n}\n";
    let r = eval_tiny(kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "compile_error");
    let reason = j["reason"].as_str().unwrap();
    assert!(
        reason.contains("kernel.c:3"),
        "the compiler's message names the line: {reason}"
    );
    assert!(reason.contains("error"), "{reason}");
}

#[test]
fn missing_entry_symbol_is_runtime_error_naming_it() {
    let kernel = "#include <stdint.h>\nvoid soft_max(const float *x, float *y, int64_t M, int64_t N) { (void)x; (void)y; (void)M; (void)N; }\n";
    let r = eval_tiny(kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "runtime_error");
    assert!(j["reason"].as_str().unwrap().contains("softmax"), "{}", j["reason"]);
}

#[test]
fn thread_creation_is_rejected_before_compiling() {
    let kernel = format!(
        "#include <pthread.h>\n{SOFTMAX_OK}\nvoid helper(void) {{ pthread_t t; pthread_create(&t, 0, 0, 0); }}\n"
    );
    let r = eval_tiny(&kernel, &[]);
    assert_eq!(r.code, 1);
    let j = r.json();
    assert_eq!(j["status"], "rejected");
    assert!(
        j["reason"].as_str().unwrap().contains("creates a thread"),
        "{}",
        j["reason"]
    );
    assert!(j["compile"].is_null(), "nothing was compiled");
}

#[test]
fn printing_to_stdout_cannot_forge_the_protocol() {
    // dprintf is not among the static rules' names, so this reaches the harness: fd 1 must not
    // be the protocol channel, and the forged lines must land in the log, not in the record.
    let task = copy_fixture("tiny_softmax");
    let kernel = SOFTMAX_OK
        .replace("#include <math.h>", "#include <math.h>\nextern int dprintf(int, const char *, ...);\n")
        .replace(
            "float m = r[0];",
            "float m = r[0]; dprintf(1, \"{\\\"event\\\": \\\"done\\\"}\\n{\\\"event\\\": \\\"workload\\\", \\\"index\\\": 0}\\n\");",
        );
    let path = task.path().join("forger.c");
    std::fs::write(&path, kernel).unwrap();
    let r = ksearch(&[
        "eval",
        task.path().to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "3",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "passed");
    assert!(
        j["log"].as_str().unwrap().contains("{\"event\": \"done\"}"),
        "the forged text lands in the log"
    );
}

/// `--build-only` without a GPU: true when this machine's harness finds nvcc, else skips with
/// a printed reason (unless KSEARCH_REQUIRE_NVCC=1, as in CI, which makes it a failure).
fn nvcc_here(test: &str, r: &Run) -> bool {
    let missing = r.stderr.contains("needs nvcc") || r.stdout.contains("needs nvcc");
    if missing && std::env::var("KSEARCH_REQUIRE_NVCC").as_deref() != Ok("1") {
        eprintln!("skipping {test}: the harness finds no nvcc (pip install nvidia-cuda-nvcc)");
        return false;
    }
    assert!(!missing, "KSEARCH_REQUIRE_NVCC=1 but: {}\n{}", r.stdout, r.stderr);
    true
}

#[test]
fn build_only_compiles_a_cuda_seed_without_a_gpu_and_reports_its_resources() {
    let r = ksearch(&["eval", "mamba_scan", "--build-only", "--arch", "sm_90a", "--json"]);
    if !nvcc_here("build_only_compiles_a_cuda_seed", &r) {
        return;
    }
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "built", "{j}");
    assert_eq!(j["build_only"], true);
    assert_eq!(j["workloads"].as_array().unwrap().len(), 0, "nothing run: {j}");
    let compile = &j["compile"];
    assert_eq!(compile["ok"], true);
    assert_eq!(compile["arch"], "sm_90a");
    assert_eq!(compile["import_check"], "on");
    let kernels = compile["resources"].as_array().unwrap();
    assert!(
        !kernels.is_empty() && kernels[0]["registers"].as_u64().unwrap() > 0,
        "{compile}"
    );
    // The human form names the kernel and its registers.
    let r = ksearch(&["eval", "mamba_scan", "--build-only", "--arch", "sm_90a"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("built for sm_90a") && r.stdout.contains("registers"),
        "{}",
        r.stdout
    );
}

#[test]
fn build_only_rejects_a_kernel_that_imports_its_way_into_the_harness() {
    let fallback =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/adversarial/cuda/reference_fallback.cu");
    let r = ksearch(&[
        "eval",
        "softmax_llm",
        fallback.to_str().unwrap(),
        "--build-only",
        "--arch",
        "sm_90a",
        "--json",
    ]);
    if !nvcc_here("build_only_rejects_a_kernel", &r) {
        return;
    }
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "rejected", "{j}");
    let reason = j["reason"].as_str().unwrap();
    assert!(reason.contains("imports dlsym"), "{reason}");
}

#[test]
fn build_only_of_cuda_needs_the_arch_and_of_c_needs_no_device() {
    let r = ksearch(&["eval", "mamba_scan", "--build-only"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("--arch"), "{}", r.stderr);
    // A C kernel builds with the C compiler alone.
    let r = ksearch(&[
        "eval",
        fixture("tiny_softmax").to_str().unwrap(),
        "--build-only",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(
        (j["status"].as_str(), j["compile"]["ok"].as_bool()),
        (Some("built"), Some(true)),
        "{j}"
    );
    // An MLX kernel's launch spec is checked against every workload, with no MLX needed.
    let r = ksearch(&["eval", "mlx_attention", "--build-only"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("checked") && r.stdout.contains("compiled by MLX at the first call"),
        "{}",
        r.stdout
    );
}

/// Issue 16: `--repeat N` evaluates N times in one process, one JSON line each; with the warm
/// server forced on (KSEARCH_WARM=1, a CPU backend) the records are those of fresh processes
/// and no evaluation fell back to one.
#[test]
fn repeated_evaluations_on_a_warm_server_match_fresh_ones() {
    let (_d, path) = write_temp("kernel.c", SOFTMAX_OK);
    let task = fixture("tiny_softmax");
    let args = [
        "eval",
        task.to_str().unwrap(),
        path.to_str().unwrap(),
        "--json",
        "--seed",
        "7",
        "--repeat",
        "3",
    ];
    let records = |warm: &str| -> Vec<serde_json::Value> {
        let r = ksearch_env(&args, &[("KSEARCH_WARM", warm)]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let digest = |j: &serde_json::Value| {
        let workloads: Vec<_> = j["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["uuid"].clone(), w["status"].clone(), w["correctness"].clone()))
            .collect();
        (j["status"].clone(), workloads)
    };
    let fresh = records("0");
    let warm = records("1");
    assert_eq!((fresh.len(), warm.len()), (3, 3));
    for j in &warm {
        assert!(
            !j["log"].as_str().unwrap_or("").contains("fresh process"),
            "{}",
            j["log"]
        );
        assert_eq!(digest(j), digest(&fresh[0]));
    }
}
