//! The harness's interpreter: a Python without NumPy is detected by the harness itself, and
//! ksearch either provides one (its own virtual environment) or says exactly what to fix.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn venv_without_numpy(dir: &Path) -> std::path::PathBuf {
    let ok = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .status()
        .expect("python3 -m venv");
    assert!(ok.success());
    dir.join("bin")
}

#[test]
fn explicit_python_without_numpy_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = venv_without_numpy(&tmp.path().join("bare"));
    let python = bin.join("python");
    let r = ksearch_env(
        &["eval", fixture("tiny_softmax").to_str().unwrap()],
        &[
            ("KSEARCH_PYTHON", python.to_str().unwrap()),
            ("KSEARCH_CACHE_DIR", tmp.path().to_str().unwrap()),
        ],
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("KSEARCH_PYTHON={} cannot import numpy", python.display())),
        "{}",
        r.stderr
    );
}

#[test]
fn python3_without_numpy_gets_a_virtual_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = venv_without_numpy(&tmp.path().join("bare"));
    let cache = tmp.path().join("cache");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let r = ksearch_env(
        &["eval", fixture("tiny_softmax").to_str().unwrap(), "--json"],
        &[("PATH", path.as_str()), ("KSEARCH_CACHE_DIR", cache.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("creating a virtual environment for the harness"),
        "{}",
        r.stderr
    );
    assert!(cache.join("venv/bin/python").is_file());
    assert_eq!(r.json()["status"], "passed");
    // The second time, the environment is simply used.
    let again = ksearch_env(
        &["eval", fixture("tiny_softmax").to_str().unwrap(), "--json"],
        &[("PATH", path.as_str()), ("KSEARCH_CACHE_DIR", cache.to_str().unwrap())],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("creating"), "{}", again.stderr);
}
