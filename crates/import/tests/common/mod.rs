//! Shared pieces of the importer tests: fixture paths, options that use the stand-in, and a run
//! of the generated reference and seed with the stand-in (tests/run_generated.py).

#![allow(dead_code)]

use ksearch_import::Options;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// Options writing to `out`, finding shapes with the stand-in (CI has no PyTorch, and a
/// developer's PyTorch must not change what these tests see).
pub fn standin(out: &Path) -> Options {
    let mut o = Options::new(out);
    o.stand_in = true;
    o
}

pub fn python() -> String {
    std::env::var("KSEARCH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs the imported task's reference and seed with the stand-in; panics with the output when
/// they fail or return shapes other than the definition's.
pub fn run_generated(task_dir: &Path) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(crate_dir.join("tests/run_generated.py"))
        .arg(task_dir)
        .arg(crate_dir.join("python"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `$KSEARCH_PYTHON` when it imports `modules` (e.g. "torch, numpy"), for the tests that need
/// PyTorch (CI installs none); `None`, after saying why `test` is skipped, otherwise.
/// `KSEARCH_REQUIRE_TORCH=1` makes a missing PyTorch a failure instead.
pub fn torch_python(test: &str, modules: &str) -> Option<PathBuf> {
    let python = std::env::var_os("KSEARCH_PYTHON").map(PathBuf::from);
    let why = match &python {
        None => "KSEARCH_PYTHON is not set".to_string(),
        Some(p) => match Command::new(p).args(["-c", &format!("import {modules}")]).output() {
            Ok(out) if out.status.success() => return python,
            Ok(out) => format!(
                "{} cannot import {modules}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
            ),
            Err(e) => format!("{} does not run: {e}", p.display()),
        },
    };
    assert!(
        std::env::var("KSEARCH_REQUIRE_TORCH").as_deref() != Ok("1"),
        "{test}: KSEARCH_REQUIRE_TORCH=1 but {why}"
    );
    eprintln!("skipping {test}: {why} (it needs PyTorch; KSEARCH_REQUIRE_TORCH=1 makes this a failure)");
    None
}
