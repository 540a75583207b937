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
/// tenth of a second per evaluation): `$KSEARCH_PYTHON` if set, else the one
/// [`python_with_numpy`] settled on in this process, else `python3`. If it lacks NumPy, the
/// harness says so and [`python_with_numpy`] provides one.
///
/// `python3` comes before ksearch's own virtual environment: that environment is a fallback made
/// where `python3` had no NumPy, and it has nothing else (no torch, no MLX). Once `python3` has
/// what the user installed, a stale environment must not hide it.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("KSEARCH_PYTHON") {
        return PathBuf::from(p);
    }
    if let Some(p) = PYTHON.get() {
        return p.clone();
    }
    PathBuf::from("python3")
}

static PYTHON: OnceLock<PathBuf> = OnceLock::new();

/// An interpreter known to import NumPy: `$KSEARCH_PYTHON` (which must have it), else
/// `python3`, else ksearch's virtual environment, else a new virtual environment with NumPy,
/// created now (`notify` is told, since it takes a while).
pub fn python_with_numpy(notify: &dyn Fn(&str)) -> Result<PathBuf, EvalError> {
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
            return Err(EvalError::Interpreter(format!(
                "KSEARCH_PYTHON={} cannot import numpy; install it there (`{} -m pip install numpy`) or unset KSEARCH_PYTHON",
                p.display(),
                p.display()
            )));
        }
        return Ok(p);
    }
    let system = PathBuf::from("python3");
    if has_numpy(&system) {
        return Ok(system);
    }
    let venv = cache_dir().join("venv");
    let venv_python = venv.join("bin").join("python");
    if has_numpy(&venv_python) {
        return Ok(venv_python);
    }
    // Several ksearch processes may start at once on a fresh machine (a parallel benchmark):
    // one creates the environment while the others wait, then use it.
    let _lock = lock_file(&cache_dir().join("venv.lock"))?;
    if has_numpy(&venv_python) {
        return Ok(venv_python);
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
            // Both streams: some Pythons print why venv failed on standard output.
            let both = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let tail: String = both
                .lines()
                .filter(|l| !l.trim().is_empty())
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
    // Debian and Ubuntu ship `venv` without `ensurepip` unless python3-venv is installed, and a
    // fresh machine has neither it nor NumPy: the environment is then made without pip, and pip
    // is run from its wheel, fetched from the package index, just to install NumPy.
    let full = ran(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    );
    if let Err(why) = full {
        let why = why.to_string();
        let _ = std::fs::remove_dir_all(&venv);
        notify(&format!(
            "python3 -m venv failed ({}); creating the environment without pip and fetching pip \
             {PIP_VERSION} from {} to install NumPy (where python3-venv is missing, installing it avoids this)",
            one_line(why.lines().skip(1).collect::<Vec<_>>().join(" ")),
            package_index()?
        ));
        ran(
            Command::new("python3").args(["-m", "venv", "--without-pip"]).arg(&venv),
            "python3 -m venv --without-pip",
        )?;
        let wheel = fetch_pip_wheel(&venv_python)?;
        notify("installing NumPy into it with pip");
        let mut pip = Command::new(&venv_python);
        pip.arg(wheel.join("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "numpy"]);
        if std::env::var_os("KSEARCH_PACKAGE_INDEX").is_some() {
            // NumPy from the same mirror as pip.
            pip.arg("--index-url").arg(format!("{}/simple/", package_index()?));
        }
        ran(&mut pip, "pip (from its wheel) install numpy")?;
    } else {
        notify("installing NumPy into it with pip");
        ran(
            Command::new(&venv_python).args(["-m", "pip", "install", "--quiet", "numpy"]),
            "pip install numpy",
        )?;
    }
    if !has_numpy(&venv_python) {
        return Err(EvalError::Setup(format!(
            "{} still cannot import numpy after installing it",
            venv_python.display()
        )));
    }
    Ok(venv_python)
}

/// An exclusive lock on `path` (created if missing), held until the file is dropped; waits
/// for another process holding it.
fn lock_file(path: &Path) -> Result<std::fs::File, EvalError> {
    use std::os::fd::AsRawFd;
    let fail = |e: std::io::Error| EvalError::Setup(format!("cannot lock {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(fail)?;
    // SAFETY: flock on a file descriptor this function owns; no memory is shared with it.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(fail(std::io::Error::last_os_error()));
    }
    Ok(file)
}

/// A multi-line message as one line of at most 240 characters.
fn one_line(text: String) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(240) {
        Some((at, _)) => format!("{}...", &joined[..at]),
        None => joined,
    }
}

/// The package index pip's wheel is fetched from: `$KSEARCH_PACKAGE_INDEX` (a mirror speaking
/// the JSON form of the simple repository API, PEP 691; NumPy then comes from it too), else
/// PyPI. Only HTTPS, or plain HTTP to this machine (a local mirror).
fn package_index() -> Result<String, EvalError> {
    let index = std::env::var("KSEARCH_PACKAGE_INDEX")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "https://pypi.org".into())
        .trim_end_matches('/')
        .to_string();
    let local = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| {
            index
                .strip_prefix(p)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
        });
    if index.starts_with("https://") || local {
        Ok(index)
    } else {
        Err(EvalError::Setup(format!(
            "KSEARCH_PACKAGE_INDEX={index}: the package index must be an https:// address (or http:// on this \
             machine): what it serves is installed and run"
        )))
    }
}

/// The pip that bootstraps NumPy where python3 has no ensurepip, pinned with its SHA-256 so that
/// the index (or a mirror) cannot substitute another file: 25.0.1 still runs on Python 3.8.
const PIP_VERSION: &str = "25.0.1";
const PIP_WHEEL: &str = "pip-25.0.1-py3-none-any.whl";
const PIP_SHA256: &str = "c46efd13b6aa8279f33f2864459c8ce587ea6a1a59ee20de055868d8f7688f7f";

/// Python (standard library only) that finds a file in the index's listing of pip (the JSON
/// simple API), downloads it, checks it against the expected SHA-256, writes it into a folder
/// through a temporary file, and prints its path. Run by the new environment's interpreter, so
/// the system's TLS certificates are used.
const FETCH_PIP: &str = r#"
import hashlib, json, os, sys, tempfile, urllib.parse, urllib.request
index, folder, name, digest = sys.argv[1:5]
listed_at = index + "/simple/pip/"
request = urllib.request.Request(listed_at, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(request, timeout=60) as r:
    listing = json.load(r)
entry = next((f for f in listing.get("files", []) if f.get("filename") == name), None)
if entry is None:
    sys.exit(f"the index does not list {name}")
# Mirrors may give the file's address relative to the listing's.
with urllib.request.urlopen(urllib.parse.urljoin(listed_at, entry["url"]), timeout=120) as r:
    data = r.read()
if hashlib.sha256(data).hexdigest() != digest:
    sys.exit(f"{name} as served does not have the SHA-256 ksearch pins for it")
os.makedirs(folder, exist_ok=True)
fd, partial = tempfile.mkstemp(dir=folder, suffix=".part")
with os.fdopen(fd, "wb") as f:
    f.write(data)
path = os.path.join(folder, name)
os.replace(partial, path)
print(path)
"#;

/// Downloads pip's wheel into the cache (see [`FETCH_PIP`]); a wheel is a zip archive that
/// Python runs as `python WHEEL/pip ...`, so nothing needs installing first.
fn fetch_pip_wheel(python: &Path) -> Result<PathBuf, EvalError> {
    let index = package_index()?;
    let folder = cache_dir().join("bootstrap");
    let out = Command::new(python)
        .args(["-c", FETCH_PIP, &index])
        .arg(&folder)
        .args([PIP_WHEEL, PIP_SHA256])
        .output()
        .map_err(|e| EvalError::Setup(format!("cannot start {}: {e}", python.display())))?;
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || printed.is_empty() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no message").trim();
        return Err(EvalError::Setup(format!(
            "cannot fetch pip's wheel from {index} ({last}); install python3-venv \
             (`apt install python3-venv`) or NumPy for python3 (`apt install python3-numpy`), \
             or set KSEARCH_PACKAGE_INDEX to a reachable mirror"
        )));
    }
    Ok(PathBuf::from(printed))
}
