//! `ksearch eval --profile` where no profile can be taken (CI: no GPU, no Nsight Compute): the
//! record and stderr say why, and the evaluation is the same as without --profile.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

/// ksearch eval on the tiny CPU softmax task with `extra`, with `env` set and `unset` removed.
fn eval_profiled(extra: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Run {
    let (_dir, kernel) = write_temp("kernel.c", SOFTMAX_OK);
    let task = fixture("tiny_softmax");
    let locks = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksearch"));
    cmd.args([
        "eval",
        task.to_str().unwrap(),
        kernel.to_str().unwrap(),
        "--seed",
        "7",
        "--profile",
    ]);
    cmd.args(extra);
    cmd.env("KSEARCH_DEVICE_LOCK_DIR", locks.path());
    for k in unset {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cannot run ksearch");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: std::time::Duration::ZERO,
    }
}

/// Whether ncu could be found here (then the "not found" path cannot be shown).
fn ncu_installed() -> bool {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("ncu").is_file()))
        .unwrap_or(false);
    on_path || Path::new("/usr/local/cuda/bin/ncu").exists() || Path::new("/opt/nvidia/nsight-compute").exists()
}

#[test]
fn without_ncu_the_record_says_so_and_the_evaluation_passes() {
    if ncu_installed() {
        eprintln!("skipped: Nsight Compute is installed here");
        return;
    }
    let r = eval_profiled(&["--json"], &[], &["KSEARCH_NCU", "CUDA_HOME", "CUDA_PATH"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "passed");
    assert!(j["speedup"].as_f64().unwrap() > 0.0);
    assert_eq!(j["profile"]["status"], "unavailable");
    let note = j["profile"]["note"].as_str().unwrap();
    assert!(
        note.starts_with("not profiled: Nsight Compute (ncu) was not found"),
        "{note}"
    );
    assert!(
        note.contains("$KSEARCH_NCU") && note.contains("the evaluation is unaffected"),
        "{note}"
    );
    assert!(
        r.stderr
            .contains("ksearch: profile: not profiled: Nsight Compute (ncu) was not found"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_named_ncu_that_is_not_there_is_said_by_name() {
    let r = eval_profiled(&["--json"], &[("KSEARCH_NCU", "/nonexistent/ncu")], &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["status"], "passed");
    assert_eq!(
        j["profile"]["note"],
        "not profiled: KSEARCH_NCU=/nonexistent/ncu is not an executable file"
    );
}

#[test]
fn with_ncu_a_cpu_kernel_is_not_profiled_and_the_table_says_why() {
    // A stand-in ncu that would fail loudly if it were run at all.
    let dir = tempfile::tempdir().unwrap();
    let ncu = dir.path().join("ncu");
    std::fs::write(
        &ncu,
        "#!/bin/sh\necho 'ncu must not run for a CPU kernel' >&2\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ncu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = eval_profiled(&[], &[("KSEARCH_NCU", ncu.to_str().unwrap())], &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("passed: 2/2 workloads"), "{}", r.stdout);
    let why = "Nsight Compute profiles CUDA kernels, and backend c runs on cpu";
    assert!(r.stdout.contains(&format!("Profile: none ({why})")), "{}", r.stdout);
    assert!(r.stderr.contains(why), "{}", r.stderr);
    assert!(!r.stderr.contains("must not run"), "{}", r.stderr);
}

#[test]
fn profile_options_are_checked_before_anything_runs() {
    let r = eval_profiled(&["--profile-workload", "nope"], &[], &[]);
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("--profile-workload: no workload named 'nope'"),
        "{}",
        r.stderr
    );
    let r = eval_profiled(&["--profile-calls", "0"], &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let r = eval_profiled(&["--build-only"], &[], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
    // Without --profile the record has no profile at all.
    let plain = eval_tiny(SOFTMAX_OK, &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(plain.json().get("profile").is_none());
}

#[test]
fn a_run_with_profile_and_no_ncu_says_so_and_searches_on() {
    let task = fixture("tiny_softmax_tunable");
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("run");
    let r = ksearch_env(
        &[
            "run",
            task.to_str().unwrap(),
            "--brain",
            "tuner",
            "--rounds",
            "2",
            "--seed",
            "3",
            "--profile",
            "--out",
            out.to_str().unwrap(),
        ],
        &[("KSEARCH_NCU", "/nonexistent/ncu")],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("--profile: Nsight Compute (ncu) was not found here"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("finished"), "{}", r.stdout);
}
