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
