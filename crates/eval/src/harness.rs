//! Where the Python harness and its interpreter come from.
//!
//! The harness package is compiled into the binary and written into each evaluation's private
//! temp dir, so a `ksearch` binary carried to another machine (the GPU host) brings the matching
//! harness with it, and no evaluation can alter another's.

use crate::EvalError;
use include_dir::{include_dir, Dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

static HARNESS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../harness/ksearch_harness");

/// The user cache folder of ksearch: `$KSEARCH_CACHE_DIR`, else `$XDG_CACHE_HOME/ksearch`,
/// else `~/.cache/ksearch`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KSEARCH_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("ksearch");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("ksearch"),
        None => std::env::temp_dir().join("ksearch-cache"),
    }
}

fn harness_files(dir: &'static Dir<'static>, out: &mut Vec<(&'static Path, &'static [u8])>) {
    for f in dir.files() {
        let is_source = f.path().extension().is_some_and(|e| e == "py");
        if is_source {
            out.push((f.path(), f.contents()));
        }
    }
    for d in dir.dirs() {
        if d.path().file_name().is_some_and(|n| n != "__pycache__") {
            harness_files(d, out);
        }
    }
}

/// Writes the harness package into `dir` (the evaluation's private temp dir) and returns the
/// folder to put on PYTHONPATH; `$KSEARCH_HARNESS_DIR` overrides it (development). A fresh copy
/// per evaluation means a candidate that rewrites the harness's files (it runs in the harness's
/// process) changes only its own evaluation, never the next one. Writing it costs about a
/// millisecond.
pub fn install_harness(dir: &Path) -> Result<PathBuf, EvalError> {
    if let Some(dev) = std::env::var_os("KSEARCH_HARNESS_DIR") {
        return Ok(PathBuf::from(dev));
    }
    let mut files = Vec::new();
    harness_files(&HARNESS, &mut files);
    let root = dir.join("harness");
    for (path, content) in &files {
        let dest = root.join("ksearch_harness").join(path);
        let io = |e: std::io::Error| EvalError::Setup(format!("cannot write the harness to {}: {e}", dest.display()));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&dest, content).map_err(io)?;
    }
    Ok(root)
}

fn has_numpy(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import numpy"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The interpreter to run the harness with, chosen without starting it (a probe would cost a
/// tenth of a second per evaluation): `$KSEARCH_PYTHON` if set, else ksearch's own virtual
/// environment if it exists, else `python3`. If it lacks NumPy, the harness says so and
/// [`python_with_numpy`] provides one.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KSEARCH_PYTHON") {
        return PathBuf::from(p);
    }
    let venv_python = cache_dir().join("venv").join("bin").join("python");
    if venv_python.is_file() {
        return venv_python;
    }
    PathBuf::from("python3")
}

/// An interpreter known to import NumPy: `$KSEARCH_PYTHON` (which must have it), else
/// ksearch's virtual environment, else `python3`, else a new virtual environment with NumPy,
/// created now (`notify` is told, since it takes a while).
pub fn python_with_numpy(notify: &dyn Fn(&str)) -> Result<PathBuf, EvalError> {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    if let Some(p) = PYTHON.get() {
        return Ok(p.clone());
    }
    let found = find_python(notify)?;
    Ok(PYTHON.get_or_init(|| found).clone())
}

fn find_python(notify: &dyn Fn(&str)) -> Result<PathBuf, EvalError> {
    if let Some(p) = std::env::var_os("KSEARCH_PYTHON") {
        let p = PathBuf::from(p);
        if !has_numpy(&p) {
            return Err(EvalError::Setup(format!(
                "KSEARCH_PYTHON={} cannot import numpy; install it there (`{} -m pip install numpy`) or unset KSEARCH_PYTHON",
                p.display(),
                p.display()
            )));
        }
        return Ok(p);
    }
    let venv = cache_dir().join("venv");
    let venv_python = venv.join("bin").join("python");
    if has_numpy(&venv_python) {
        return Ok(venv_python);
    }
    let system = PathBuf::from("python3");
    if has_numpy(&system) {
        return Ok(system);
    }
    notify(&format!(
        "python3 has no NumPy; creating a virtual environment for the harness in {} (once)",
        venv.display()
    ));
    let ran = |cmd: &mut Command, what: &str| -> Result<(), EvalError> {
        let out = cmd
            .output()
            .map_err(|e| EvalError::Setup(format!("{what}: cannot start: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            let tail: String = String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            Err(EvalError::Setup(format!("{what} failed:\n{tail}")))
        }
    };
    ran(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv (on Debian/Ubuntu, `apt install python3-venv` provides it)",
    )?;
    notify("installing NumPy into it with pip");
    ran(
        Command::new(&venv_python).args(["-m", "pip", "install", "--quiet", "numpy"]),
        "pip install numpy",
    )?;
    if !has_numpy(&venv_python) {
        return Err(EvalError::Setup(format!(
            "{} still cannot import numpy after installing it",
            venv_python.display()
        )));
    }
    Ok(venv_python)
}
