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

/// A `python3` as Debian ships it without the python3-venv package: `-m venv` stops for lack of
/// ensurepip unless asked for an environment without pip; and it has no NumPy.
fn debian_python3_without_venv(dir: &Path) -> std::path::PathBuf {
    let bare = venv_without_numpy(&dir.join("bare"));
    let shim = dir.join("shim");
    std::fs::create_dir_all(&shim).unwrap();
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = -m ] && [ \"$2\" = venv ] && [ \"$3\" != --without-pip ]; then\n\
         echo 'The virtual environment was not created successfully because ensurepip is not' >&2\n\
         echo 'available.  On Debian/Ubuntu systems, you need to install the python3-venv' >&2\n\
         echo 'package using the following command.' >&2\n\
         exit 1\n\
         fi\n\
         exec {} \"$@\"\n",
        bare.join("python").display()
    );
    let python3 = shim.join("python3");
    std::fs::write(&python3, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python3, std::fs::Permissions::from_mode(0o755)).unwrap();
    shim
}

/// `ksearch eval` of the tiny softmax behind [`debian_python3_without_venv`], with a fresh cache
/// (returned) and, if given, a package index.
fn eval_behind_debian_python3(dir: &Path, index: Option<&str>, json: bool) -> (Run, std::path::PathBuf) {
    let shim = debian_python3_without_venv(dir);
    let cache = dir.join("cache");
    let path = format!("{}:{}", shim.display(), std::env::var("PATH").unwrap_or_default());
    let task = fixture("tiny_softmax");
    let mut args = vec!["eval", task.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let mut env = vec![("PATH", path.as_str()), ("KSEARCH_CACHE_DIR", cache.to_str().unwrap())];
    if let Some(index) = index {
        env.push(("KSEARCH_PACKAGE_INDEX", index));
    }
    (ksearch_env(&args, &env), cache)
}

#[test]
fn python3_without_ensurepip_gets_pip_from_its_wheel() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, cache) = eval_behind_debian_python3(tmp.path(), None, true);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("python3 -m venv failed"), "{}", r.stderr);
    assert!(
        r.stderr.contains("fetching pip 25.0.1 from https://pypi.org"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("ensurepip is not available"), "{}", r.stderr);
    assert_eq!(r.json()["status"], "passed");
    assert!(cache.join("venv/bin/python").is_file());
    let wheels: Vec<_> = std::fs::read_dir(cache.join("bootstrap")).unwrap().flatten().collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    assert_eq!(wheels[0].file_name().to_string_lossy(), "pip-25.0.1-py3-none-any.whl");
}

#[test]
fn an_unreachable_package_index_is_named_with_what_to_install() {
    let tmp = tempfile::tempdir().unwrap();
    // A port nothing listens on: the fetch fails at once.
    let (r, _) = eval_behind_debian_python3(tmp.path(), Some("http://127.0.0.1:9"), false);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot fetch pip's wheel from http://127.0.0.1:9"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("apt install python3-venv"), "{}", r.stderr);
}

#[test]
fn the_harness_runs_with_single_threaded_blas_and_sleeping_openmp_threads() {
    // A stand-in interpreter that records the environment ksearch gives the harness, then
    // fails: what matters is what the evaluation of an OpenMP task would have run under.
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("env.txt");
    let python = tmp.path().join("python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\nif [ \"$1\" = -c ]; then exit 0; fi\nenv > {}\nexit 3\n",
            dump.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = ksearch_env(
        &["eval", "softmax"],
        &[
            ("KSEARCH_PYTHON", python.to_str().unwrap()),
            ("KSEARCH_CACHE_DIR", tmp.path().to_str().unwrap()),
        ],
    );
    assert_ne!(r.code, 0, "the stand-in cannot evaluate anything: {}", r.stderr);
    let env = std::fs::read_to_string(&dump).unwrap_or_else(|e| panic!("no environment recorded ({e}): {}", r.stderr));
    for expected in ["OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OMP_WAIT_POLICY=passive"] {
        assert!(env.lines().any(|l| l == expected), "{expected} missing:\n{env}");
    }
    // softmax enables OpenMP: its candidates get every core.
    let cores = std::thread::available_parallelism().unwrap().get();
    assert!(env.lines().any(|l| l == format!("OMP_NUM_THREADS={cores}")), "{env}");
}

#[test]
fn a_package_index_over_plain_http_elsewhere_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, cache) = eval_behind_debian_python3(tmp.path(), Some("http://mirror.example"), false);
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("KSEARCH_PACKAGE_INDEX=http://mirror.example: the package index must be an https://"),
        "{}",
        r.stderr
    );
    assert!(!cache.join("bootstrap").exists(), "nothing was fetched");
}

#[test]
fn python3_with_numpy_comes_before_an_old_virtual_environment() {
    // ksearch's environment is made where python3 had no NumPy and holds nothing else; once
    // python3 has NumPy (and torch, MLX, what the user installed), it is the one used. The old
    // environment here is a stand-in that records being started and fails.
    if !Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipping: python3 has no NumPy here");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let bin = cache.join("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let started = tmp.path().join("started");
    let stand_in = bin.join("python");
    std::fs::write(&stand_in, format!("#!/bin/sh\ntouch {}\nexit 1\n", started.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = ksearch_env(
        &["eval", fixture("tiny_softmax").to_str().unwrap(), "--json"],
        &[("KSEARCH_CACHE_DIR", cache.to_str().unwrap())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["status"], "passed");
    assert!(!started.exists(), "the old environment was started: {}", r.stderr);
}
