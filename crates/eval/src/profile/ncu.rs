//! Finding Nsight Compute, its version, and the command line it runs the harness under.

use super::{METRICS, SECTIONS};
use std::path::{Path, PathBuf};

/// `$KSEARCH_NCU`, else `ncu` in `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, on PATH, in
/// `/usr/local/cuda/bin`, or the newest `/opt/nvidia/nsight-compute/*/ncu`.
pub fn find_ncu() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KSEARCH_NCU") {
        let p = PathBuf::from(p);
        return is_executable(&p).then_some(p);
    }
    let mut dirs: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|d| PathBuf::from(d).join("bin"))
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    let mut installs: Vec<PathBuf> = std::fs::read_dir("/opt/nvidia/nsight-compute")
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    installs.sort();
    dirs.extend(installs.into_iter().rev());
    dirs.into_iter().map(|d| d.join("ncu")).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The arguments of ncu around `python -m ksearch_harness`: the raw page as CSV in base units,
/// to `log_file`, for kernels launched between cudaProfilerStart and Stop only. Clocks are left
/// as they run (`--clock-control none`), as the evaluation's timing leaves them; with
/// `named_metrics` false only the sections are asked for.
pub fn ncu_arguments(python: &Path, log_file: &Path, named_metrics: bool) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "function",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--clock-control",
        "none",
    ]
    .iter()
    .map(Into::into)
    .collect();
    for section in SECTIONS {
        args.push("--section".into());
        args.push(section.into());
    }
    if named_metrics {
        args.push("--metrics".into());
        args.push(METRICS.join(",").into());
    }
    args.push("--log-file".into());
    args.push(log_file.as_os_str().to_owned());
    args.push(python.as_os_str().to_owned());
    args.push("-m".into());
    args.push("ksearch_harness".into());
    args
}

/// `ncu --version`'s version line as `ncu VERSION`, or plain `ncu`.
pub(super) fn ncu_version(ncu: &Path) -> String {
    let out = std::process::Command::new(ncu)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Version "))
        .and_then(|v| v.split_whitespace().next())
        .map(|v| format!("ncu {v}"))
        .unwrap_or_else(|| "ncu".to_string())
}
