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
            "python3 -m venv could not set up pip ({}); creating the environment without pip and \
             fetching pip's wheel from {} to install NumPy (installing python3-venv avoids this)",
            one_line(why.lines().skip(1).collect::<Vec<_>>().join(" ")),
            package_index()
        ));
        ran(
            Command::new("python3").args(["-m", "venv", "--without-pip"]).arg(&venv),
            "python3 -m venv --without-pip",
        )?;
        let wheel = fetch_pip_wheel(&venv_python)?;
        notify("installing NumPy into it with pip");
        ran(
            Command::new(&venv_python).arg(wheel.join("pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "numpy",
            ]),
            "pip (from its wheel) install numpy",
        )?;
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

/// A multi-line message as one line of at most 240 characters.
fn one_line(text: String) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(240) {
        Some((at, _)) => format!("{}...", &joined[..at]),
        None => joined,
    }
}

/// The package index pip's wheel is fetched from: `$KSEARCH_PACKAGE_INDEX` (a mirror speaking
/// PyPI's JSON API), else PyPI. NumPy itself comes from wherever pip is configured to look.
fn package_index() -> String {
    std::env::var("KSEARCH_PACKAGE_INDEX")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "https://pypi.org".into())
        .trim_end_matches('/')
        .to_string()
}

/// Python (standard library only) that downloads the newest pure-Python pip wheel listed by
/// the index's JSON API into a folder, checks its SHA-256 against the listing, and prints its
/// path. Run by the new environment's interpreter, so the system's TLS certificates are used.
const FETCH_PIP: &str = r#"
import hashlib, json, os, sys, urllib.parse, urllib.request
index, folder = sys.argv[1], sys.argv[2]
listed_at = index + "/pypi/pip/json"
with urllib.request.urlopen(listed_at, timeout=60) as r:
    listing = json.load(r)
wheels = [u for u in listing["urls"] if u["filename"].endswith("-py3-none-any.whl")]
if not wheels:
    sys.exit("the index lists no py3-none-any wheel for pip's latest release")
wheel = wheels[0]
# Mirrors may list the file relative to the listing's address.
with urllib.request.urlopen(urllib.parse.urljoin(listed_at, wheel["url"]), timeout=120) as r:
    data = r.read()
if hashlib.sha256(data).hexdigest() != wheel["digests"]["sha256"]:
    sys.exit("the pip wheel's SHA-256 does not match the index's listing")
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, wheel["filename"])
with open(path, "wb") as f:
    f.write(data)
print(path)
"#;

/// Downloads pip's wheel into the cache (see [`FETCH_PIP`]); a wheel is a zip archive that
/// Python runs as `python WHEEL/pip ...`, so nothing needs installing first.
fn fetch_pip_wheel(python: &Path) -> Result<PathBuf, EvalError> {
    let index = package_index();
    let folder = cache_dir().join("bootstrap");
    let out = Command::new(python)
        .args(["-c", FETCH_PIP, &index])
        .arg(&folder)
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
